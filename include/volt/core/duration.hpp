/// \file
/// volt::Duration: a length of time given as Lightning gives one to `Trainer(max_time=...)` and
/// `Timer(duration=...)`: any std::chrono duration, or a string "DD:HH:MM:SS" (days, then two digits each of
/// hours, minutes and seconds: "00:12:00:00" is twelve hours). Includes nothing of LibTorch.
#pragma once

#include <volt/core/errors.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

namespace volt {

/// A length of time: `std::chrono::hours(12)`, `std::chrono::milliseconds(1500)`, or Lightning's string form
/// "DD:HH:MM:SS" (surrounding spaces allowed). A malformed string throws volt::MisconfigurationError with
/// Lightning's message ("`Timer(duration='1:2:3')` is not a valid duration. Expected a string in the format
/// DD:HH:MM:SS.").
class Duration {
 public:
  /// Any std::chrono duration (converted to seconds as a double).
  template <class Rep, class Period>
  constexpr Duration(std::chrono::duration<Rep, Period> value)  // NOLINT(google-explicit-constructor)
      : seconds_(std::chrono::duration<double>(value)) {}
  /// Lightning's "DD:HH:MM:SS".
  Duration(std::string_view text) : seconds_(parse(text)) {}  // NOLINT(google-explicit-constructor)
  /// Lightning's "DD:HH:MM:SS".
  Duration(const char* text) : Duration(std::string_view(text != nullptr ? text : "")) {}  // NOLINT
  /// Lightning's "DD:HH:MM:SS".
  Duration(const std::string& text) : Duration(std::string_view(text)) {}  // NOLINT

  /// The length in seconds.
  constexpr std::chrono::duration<double> value() const { return seconds_; }
  /// The length in seconds, as a number.
  constexpr double seconds() const { return seconds_.count(); }

  /// The length as Python prints a datetime.timedelta: "0:00:05", "0:00:01.500000", "1 day, 0:00:00".
  std::string to_string() const {
    const auto micro = static_cast<std::int64_t>(std::llround(seconds_.count() * 1e6));
    std::int64_t whole = micro / 1'000'000;
    std::int64_t fraction = micro % 1'000'000;
    if (fraction < 0) {
      fraction += 1'000'000;
      --whole;
    }
    std::string out = format_seconds(whole);
    if (fraction != 0) {
      std::string digits = std::to_string(fraction);
      out += "." + std::string(6 - digits.size(), '0') + digits;
    }
    return out;
  }

  /// Whole seconds as Python prints a datetime.timedelta: "0:00:05", "12:00:00", "1 day, 2:03:04",
  /// "3 days, 0:00:00" (negative values as "-1 day, 23:59:59", as Python does).
  static std::string format_seconds(std::int64_t total) {
    std::int64_t days = total / 86400;
    std::int64_t rest = total % 86400;
    if (rest < 0) {
      rest += 86400;
      --days;
    }
    const auto two = [](std::int64_t v) { return (v < 10 ? "0" : "") + std::to_string(v); };
    std::string out;
    if (days != 0) out = std::to_string(days) + (days == 1 || days == -1 ? " day, " : " days, ");
    return out + std::to_string(rest / 3600) + ":" + two(rest % 3600 / 60) + ":" + two(rest % 60);
  }

 private:
  static constexpr std::int64_t max_days = 999'999'999;

  static std::chrono::duration<double> parse(std::string_view text) {
    std::string_view s = text;
    const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; };
    while (!s.empty() && space(s.front())) s.remove_prefix(1);
    while (!s.empty() && space(s.back())) s.remove_suffix(1);
    const auto digit = [](char c) { return c >= '0' && c <= '9'; };
    std::size_t i = 0;
    std::int64_t days = 0;
    bool ok = false;
    while (i < s.size() && digit(s[i])) {
      ok = true;
      if (days <= max_days) days = days * 10 + (s[i] - '0');  // past max_days it is refused below
      ++i;
    }
    std::int64_t parts[3] = {0, 0, 0};
    for (auto& part : parts) {
      if (!ok || i + 3 > s.size() || s[i] != ':' || !digit(s[i + 1]) || !digit(s[i + 2])) {
        ok = false;
        break;
      }
      part = (s[i + 1] - '0') * 10 + (s[i + 2] - '0');
      i += 3;
    }
    if (!ok || i != s.size()) {
      throw MisconfigurationError("`Timer(duration=" + quoted(text) +
                                  ")` is not a valid duration. Expected a string in the format DD:HH:MM:SS.");
    }
    // The longest datetime.timedelta (999999999 days); Lightning's Timer raises OverflowError past it.
    const std::int64_t total = days * 86400 + parts[0] * 3600 + parts[1] * 60 + parts[2];
    if (total >= (max_days + 1) * 86400) {
      throw MisconfigurationError("`Timer(duration=" + quoted(text) +
                                  ")` is too long: a duration is at most 999999999 days, 23:59:59.");
    }
    return std::chrono::duration<double>(static_cast<double>(total));
  }

  // Python's repr() of an ASCII str.
  static std::string quoted(std::string_view text) {
    const bool double_quotes = text.find('\'') != std::string_view::npos && text.find('"') == std::string_view::npos;
    const char quote = double_quotes ? '"' : '\'';
    std::string out(1, quote);
    for (const char c : text) {
      if (c == quote || c == '\\') {
        out += '\\';
        out += c;
      } else if (c == '\n') {
        out += "\\n";
      } else if (c == '\t') {
        out += "\\t";
      } else if (c == '\r') {
        out += "\\r";
      } else {
        out += c;
      }
    }
    return out + quote;
  }

  std::chrono::duration<double> seconds_;
};

}  // namespace volt

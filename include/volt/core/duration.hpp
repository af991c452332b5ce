/// \file
/// volt::Duration: a length of time given as Lightning gives one to `Trainer(max_time=...)` and
/// `Timer(duration=...)`: any std::chrono duration, or a string "DD:HH:MM:SS" (days, then two digits each of
/// hours, minutes and seconds: "00:12:00:00" is twelve hours). Includes nothing of LibTorch.
#pragma once

#include <volt/core/linkage.hpp>
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
  std::string to_string() const;

  /// Whole seconds as Python prints a datetime.timedelta: "0:00:05", "12:00:00", "1 day, 2:03:04",
  /// "3 days, 0:00:00" (negative values as "-1 day, 23:59:59", as Python does).
  static std::string format_seconds(std::int64_t total);

 private:
  static constexpr std::int64_t max_days = 999'999'999;

  static std::chrono::duration<double> parse(std::string_view text);

  // Python's repr() of an ASCII str.
  static std::string quoted(std::string_view text);

  std::chrono::duration<double> seconds_;
};

}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/core/impl/duration.ipp>
#endif

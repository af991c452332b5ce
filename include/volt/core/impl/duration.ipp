/// \file
/// Definitions of the functions declared in volt/core/duration.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt {

VOLT_INLINE std::string Duration::to_string() const {
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

VOLT_INLINE std::string Duration::format_seconds(std::int64_t total) {
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

VOLT_INLINE auto Duration::parse(std::string_view text) -> std::chrono::duration<double> {
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

VOLT_INLINE std::string Duration::quoted(std::string_view text) {
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

}  // namespace volt

/// \file
/// Python's text rules that Lightning's device parsing relies on, for ASCII text and usable in constant
/// evaluation: str.strip() and str.isspace(), int(text, 10) and repr() of a str. Implementation of
/// volt/accelerators/device_spec.hpp, no public API; like it, includes nothing of LibTorch.
#pragma once

#include <volt/core/linkage.hpp>
#include <climits>
#include <cstddef>
#include <string>
#include <string_view>

namespace volt::detail {

// Python's str.strip() with no argument removes these ASCII characters (str.isspace()); int() itself
// strips only the first six, which matters for the CPU parser (see DeviceSpec::cpu_int_rejects_text_).
constexpr bool is_python_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r' || c == '\x1c' || c == '\x1d' ||
         c == '\x1e' || c == '\x1f';
}
constexpr bool is_c_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}
constexpr bool is_ascii_digit(char c) { return c >= '0' && c <= '9'; }

constexpr std::string_view python_strip(std::string_view text) {
  while (!text.empty() && is_python_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_python_space(text.back())) text.remove_suffix(1);
  return text;
}

enum class IntParse : unsigned char { ok, invalid_literal, out_of_range };

struct ParsedInt {
  IntParse status = IntParse::ok;
  int value = 0;
};

/// Python's int(text, 10) for ASCII text that has already been stripped: an optional sign, then decimal
/// digits where single underscores may separate digits ("1_0" is 10; "_1", "1_", "1__0" are invalid).
/// Leading zeros are allowed ("010" is 10). Values outside int are `out_of_range` (Python has no limit).
constexpr ParsedInt python_int(std::string_view text) {
  ParsedInt result;
  std::size_t position = 0;
  bool negative = false;
  if (position < text.size() && (text[position] == '+' || text[position] == '-')) {
    negative = text[position] == '-';
    ++position;
  }
  if (position == text.size() || !is_ascii_digit(text[position])) return {IntParse::invalid_literal, 0};
  const long long limit = negative ? -static_cast<long long>(INT_MIN) : static_cast<long long>(INT_MAX);
  long long magnitude = 0;
  bool overflow = false;
  while (position < text.size()) {
    char c = text[position];
    if (c == '_') {
      ++position;
      if (position == text.size() || !is_ascii_digit(text[position])) return {IntParse::invalid_literal, 0};
      c = text[position];
    }
    if (!is_ascii_digit(c)) return {IntParse::invalid_literal, 0};
    if (!overflow) {
      magnitude = magnitude * 10 + (c - '0');
      if (magnitude > limit) overflow = true;
    }
    ++position;
  }
  if (overflow) return {IntParse::out_of_range, 0};
  result.value = negative ? static_cast<int>(-magnitude) : static_cast<int>(magnitude);
  return result;
}

/// Python's repr() of an ASCII str: single quotes unless the text holds ' and no ", backslash escapes
/// for \\, \n, \r, \t and other control characters as \xNN. Bytes >= 0x80 are copied unchanged (volt
/// treats them as opaque; Python would show printable Unicode as is and escape the rest).
VOLT_INLINE std::string python_repr(std::string_view text);

}  // namespace volt::detail

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/accelerators/detail/impl/python_text.ipp>
#endif

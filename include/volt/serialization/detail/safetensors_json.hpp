/// \file
/// The JSON of safetensors headers: a reader for the subset the format uses (the string escaping Python's
/// package writes is volt/core/encoding.hpp's). Used by volt/serialization/detail/safetensors_header.hpp.
///
/// The reader is hand-written rather than a JSON library: volt's core depends on LibTorch alone, and the
/// header needs a fraction of JSON (one object of objects holding strings, non-negative integers and arrays
/// of them). It accepts what a conforming JSON parser accepts for that subset (any whitespace, escapes with
/// \\uXXXX and surrogate pairs, unknown members skipped) and rejects, with a message, everything else:
/// invalid UTF-8, control characters in strings, negative or fractional numbers where integers belong,
/// numbers over 64 bits, nesting deeper than 64, a truncated text.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/encoding.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>

namespace volt {

/// A safetensors file could not be written or read, is malformed, or does not fit the model. Says which file
/// and what is wrong.
class SafetensorsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail::safetensors {

/// The deepest nesting of arrays and objects the reader follows (skipped members included).
inline constexpr int max_depth = 64;

/// Whether `text` is well-formed UTF-8 (no overlong forms, surrogates or code points above U+10FFFF).
VOLT_INLINE bool valid_utf8(std::string_view text);

/// A reader of the JSON subset of the header. Every method throws SafetensorsError saying what was expected
/// at which byte of the header.
class JsonReader {
 public:
  explicit JsonReader(std::string_view text) : text_(text) {}

  [[noreturn]] void fail(const std::string& what) const;

  void skip_whitespace();
  bool at_end();
  char peek();
  void expect(char c);
  /// Consumes `c` if it comes next.
  bool consume(char c);

  std::string read_string();

  /// A non-negative integer of at most 64 bits.
  std::uint64_t read_uint();

  std::vector<std::uint64_t> read_uint_array();

  /// Skips one value of any JSON type (a member the format does not define).
  void skip_value(int depth);

  /// Consumes `word` if it comes next.
  bool literal(std::string_view word);

 private:
  static std::string shown(char c);

  unsigned read_hex4();

  void append_code_point(std::string& out);

  void skip_number();

  std::string_view text_;
  std::size_t pos_ = 0;
};


}  // namespace detail::safetensors
}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/serialization/detail/impl/safetensors_json.ipp>
#endif

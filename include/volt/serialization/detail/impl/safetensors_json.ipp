/// \file
/// Definitions of the functions declared in volt/serialization/detail/safetensors_json.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail::safetensors {

VOLT_INLINE bool valid_utf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    std::size_t length = 0;
    std::uint32_t point = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      length = 2, point = c & 0x1FU;
    } else if ((c & 0xF0) == 0xE0) {
      length = 3, point = c & 0x0FU;
    } else if ((c & 0xF8) == 0xF0) {
      length = 4, point = c & 0x07U;
    } else {
      return false;
    }
    if (text.size() - i < length) return false;
    for (std::size_t k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xC0) != 0x80) return false;
      point = point << 6 | (next & 0x3FU);
    }
    const std::uint32_t smallest[] = {0, 0, 0x80, 0x800, 0x10000};
    if (point < smallest[length] || point > 0x10FFFF || (point >= 0xD800 && point <= 0xDFFF)) return false;
    i += length;
  }
  return true;
}

VOLT_INLINE void JsonReader::fail(const std::string& what) const {
  throw SafetensorsError("the JSON header is malformed at byte " + std::to_string(pos_) + ": " + what);
}

VOLT_INLINE void JsonReader::skip_whitespace() {
  while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r')) {
    ++pos_;
  }
}

VOLT_INLINE bool JsonReader::at_end() {
  skip_whitespace();
  return pos_ == text_.size();
}

VOLT_INLINE char JsonReader::peek() {
  skip_whitespace();
  if (pos_ == text_.size()) fail("the header ends early");
  return text_[pos_];
}

VOLT_INLINE void JsonReader::expect(char c) {
  if (peek() != c) fail(std::string("expected '") + c + "', found " + shown(text_[pos_]));
  ++pos_;
}

VOLT_INLINE bool JsonReader::consume(char c) {
  if (peek() != c) return false;
  ++pos_;
  return true;
}

VOLT_INLINE std::string JsonReader::read_string() {
  expect('"');
  std::string out;
  while (true) {
    if (pos_ == text_.size()) fail("a string is not closed");
    const char c = text_[pos_++];
    if (c == '"') return out;
    if (static_cast<unsigned char>(c) < 0x20) fail("a control character inside a string");
    if (c != '\\') {
      out += c;
      continue;
    }
    if (pos_ == text_.size()) fail("a string is not closed");
    const char escape = text_[pos_++];
    switch (escape) {
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case '/': out += '/'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'u': append_code_point(out); break;
      default: --pos_, fail(std::string("an unknown escape \\") + shown(escape));
    }
  }
}

VOLT_INLINE std::uint64_t JsonReader::read_uint() {
  const char first = peek();
  if (first < '0' || first > '9') fail("expected a non-negative integer, found " + shown(first));
  std::uint64_t value = 0;
  const std::size_t start = pos_;
  while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
    const auto digit = static_cast<std::uint64_t>(text_[pos_] - '0');
    if (value > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) fail("an integer over 64 bits");
    value = value * 10 + digit;
    ++pos_;
  }
  if (text_[start] == '0' && pos_ - start > 1) fail("an integer with a leading zero");
  if (pos_ < text_.size() && (text_[pos_] == '.' || text_[pos_] == 'e' || text_[pos_] == 'E')) {
    fail("expected an integer, found a fraction or exponent");
  }
  return value;
}

VOLT_INLINE auto JsonReader::read_uint_array() -> std::vector<std::uint64_t> {
  std::vector<std::uint64_t> values;
  expect('[');
  if (consume(']')) return values;
  do {
    values.push_back(read_uint());
  } while (consume(','));
  expect(']');
  return values;
}

VOLT_INLINE void JsonReader::skip_value(int depth) {
  if (depth > max_depth) fail("nesting deeper than " + std::to_string(max_depth));
  const char c = peek();
  if (c == '"') {
    read_string();
  } else if (c == '{' || c == '[') {
    const char close = c == '{' ? '}' : ']';
    ++pos_;
    if (consume(close)) return;
    do {
      if (c == '{') {
        read_string();
        expect(':');
      }
      skip_value(depth + 1);
    } while (consume(','));
    expect(close);
  } else if (c == '-' || (c >= '0' && c <= '9')) {
    skip_number();
  } else if (!literal("true") && !literal("false") && !literal("null")) {
    fail("expected a JSON value, found " + shown(c));
  }
}

VOLT_INLINE bool JsonReader::literal(std::string_view word) {
  if (peek() != word.front() || text_.substr(pos_, word.size()) != word) return false;
  pos_ += word.size();
  return true;
}

VOLT_INLINE std::string JsonReader::shown(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7F) return std::string("'") + c + "'";
  return "byte " + std::to_string(u);
}

VOLT_INLINE unsigned JsonReader::read_hex4() {
  if (text_.size() - pos_ < 4) fail("a \\u escape is cut short");
  unsigned value = 0;
  for (int i = 0; i < 4; ++i) {
    const char h = text_[pos_++];
    value <<= 4;
    if (h >= '0' && h <= '9') value |= static_cast<unsigned>(h - '0');
    else if (h >= 'a' && h <= 'f') value |= static_cast<unsigned>(h - 'a' + 10);
    else if (h >= 'A' && h <= 'F') value |= static_cast<unsigned>(h - 'A' + 10);
    else --pos_, fail("a \\u escape with a non-hexadecimal digit " + shown(h));
  }
  return value;
}

VOLT_INLINE void JsonReader::append_code_point(std::string& out) {
  std::uint32_t point = read_hex4();
  if (point >= 0xDC00 && point <= 0xDFFF) fail("a \\u escape of a lone low surrogate");
  if (point >= 0xD800 && point <= 0xDBFF) {
    if (text_.substr(pos_, 2) != "\\u") fail("a high surrogate without its low surrogate");
    pos_ += 2;
    const std::uint32_t low = read_hex4();
    if (low < 0xDC00 || low > 0xDFFF) fail("a high surrogate without its low surrogate");
    point = 0x10000 + ((point - 0xD800) << 10) + (low - 0xDC00);
  }
  if (point < 0x80) {
    out += static_cast<char>(point);
  } else if (point < 0x800) {
    out += static_cast<char>(0xC0 | (point >> 6));
    out += static_cast<char>(0x80 | (point & 0x3F));
  } else if (point < 0x10000) {
    out += static_cast<char>(0xE0 | (point >> 12));
    out += static_cast<char>(0x80 | ((point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (point & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (point >> 18));
    out += static_cast<char>(0x80 | ((point >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (point & 0x3F));
  }
}

VOLT_INLINE void JsonReader::skip_number() {
  const auto digits = [this] {
    const std::size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
    if (pos_ == start) fail("a number without digits");
  };
  if (text_[pos_] == '-') ++pos_;
  digits();
  if (pos_ < text_.size() && text_[pos_] == '.') ++pos_, digits();
  if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
    ++pos_;
    if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
    digits();
  }
}

}  // namespace volt::detail::safetensors

/// \file
/// Definitions of the functions declared in volt/serialization/detail/inflate.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail::inflate {

VOLT_INLINE std::optional<std::string> raw(std::string_view input, std::size_t output_limit) {
  return Decoder(input, output_limit).run();
}

VOLT_INLINE auto Decoder::run() -> std::optional<std::string> {
  for (;;) {
    const int last = bits(1);
    const int type = bits(2);
    if (failed_) return std::nullopt;
    bool ok = false;
    if (type == 0) {
      ok = stored();
    } else if (type == 1) {
      ok = fixed();
    } else if (type == 2) {
      ok = dynamic();
    }
    if (!ok || failed_) return std::nullopt;
    if (last == 1) return std::move(out_);
  }
}

VOLT_INLINE int Decoder::bits(int need) {
  std::uint32_t value = bit_buffer_;
  while (bit_count_ < need) {
    if (position_ >= in_.size()) {
      failed_ = true;
      return 0;
    }
    value |= static_cast<std::uint32_t>(static_cast<unsigned char>(in_[position_++])) << bit_count_;
    bit_count_ += 8;
  }
  bit_buffer_ = value >> need;
  bit_count_ -= need;
  return static_cast<int>(value & ((1U << need) - 1U));
}

VOLT_INLINE bool Decoder::stored() {
  bit_buffer_ = 0;
  bit_count_ = 0;
  if (position_ + 4 > in_.size()) return false;
  const auto byte = [&](std::size_t at) { return static_cast<std::uint32_t>(static_cast<unsigned char>(in_[at])); };
  const std::uint32_t length = byte(position_) | byte(position_ + 1) << 8;
  const std::uint32_t complement = byte(position_ + 2) | byte(position_ + 3) << 8;
  position_ += 4;
  if (length != (~complement & 0xFFFFU)) return false;
  if (position_ + length > in_.size() || out_.size() + length > limit_) return false;
  out_.append(in_.data() + position_, length);
  position_ += length;
  return true;
}

VOLT_INLINE bool Decoder::build(Huffman& code, const std::uint16_t* lengths, int n) {
  code.count.fill(0);
  for (int symbol = 0; symbol < n; ++symbol) ++code.count[lengths[symbol]];
  if (code.count[0] == n) return true;
  int left = 1;
  for (int length = 1; length < 16; ++length) {
    left <<= 1;
    left -= code.count[static_cast<std::size_t>(length)];
    if (left < 0) return false;
  }
  std::array<std::uint16_t, 16> offsets{};
  for (int length = 1; length < 15; ++length) {
    offsets[static_cast<std::size_t>(length + 1)] =
        static_cast<std::uint16_t>(offsets[static_cast<std::size_t>(length)] + code.count[static_cast<std::size_t>(length)]);
  }
  for (int symbol = 0; symbol < n; ++symbol) {
    if (lengths[symbol] != 0) code.symbol[offsets[lengths[symbol]]++] = static_cast<std::uint16_t>(symbol);
  }
  return true;
}

VOLT_INLINE int Decoder::decode(const Huffman& code) {
  int value = 0;
  int first = 0;
  int index = 0;
  for (int length = 1; length < 16; ++length) {
    value |= bits(1);
    if (failed_) return -1;
    const int count = code.count[static_cast<std::size_t>(length)];
    if (value - count < first) return code.symbol[static_cast<std::size_t>(index + (value - first))];
    index += count;
    first += count;
    first <<= 1;
    value <<= 1;
  }
  failed_ = true;  // a code no symbol has
  return -1;
}

VOLT_INLINE bool Decoder::codes(const Huffman& lengths_code, const Huffman& distances_code) {
  static constexpr std::array<std::uint16_t, 29> length_base{3,  4,  5,  6,  7,  8,  9,  10, 11,  13,
                                                             15, 17, 19, 23, 27, 31, 35, 43, 51,  59,
                                                             67, 83, 99, 115, 131, 163, 195, 227, 258};
  static constexpr std::array<std::uint16_t, 29> length_extra{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                                              2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
  static constexpr std::array<std::uint16_t, 30> distance_base{
      1,   2,   3,   4,   5,   7,    9,    13,   17,   25,   33,   49,   65,    97,    129,
      193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
  static constexpr std::array<std::uint16_t, 30> distance_extra{0, 0, 0, 0, 1, 1, 2,  2,  3,  3,  4,  4,  5,  5,  6,
                                                                6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};
  for (;;) {
    int symbol = decode(lengths_code);
    if (failed_ || symbol < 0) return false;
    if (symbol < 256) {
      if (out_.size() >= limit_) return false;
      out_.push_back(static_cast<char>(symbol));
      continue;
    }
    if (symbol == 256) return true;
    symbol -= 257;
    if (symbol >= 29) return false;
    const std::size_t length = length_base[static_cast<std::size_t>(symbol)] +
                               static_cast<std::size_t>(bits(length_extra[static_cast<std::size_t>(symbol)]));
    const int distance_symbol = decode(distances_code);
    if (failed_ || distance_symbol < 0 || distance_symbol >= 30) return false;
    const std::size_t distance = distance_base[static_cast<std::size_t>(distance_symbol)] +
                                 static_cast<std::size_t>(bits(distance_extra[static_cast<std::size_t>(distance_symbol)]));
    if (failed_ || distance > out_.size() || out_.size() + length > limit_) return false;
    const std::size_t from = out_.size() - distance;
    for (std::size_t i = 0; i < length; ++i) out_.push_back(out_[from + i]);
  }
}

VOLT_INLINE bool Decoder::fixed() {
  std::array<std::uint16_t, 320> lengths{};
  for (int symbol = 0; symbol < 144; ++symbol) lengths[static_cast<std::size_t>(symbol)] = 8;
  for (int symbol = 144; symbol < 256; ++symbol) lengths[static_cast<std::size_t>(symbol)] = 9;
  for (int symbol = 256; symbol < 280; ++symbol) lengths[static_cast<std::size_t>(symbol)] = 7;
  for (int symbol = 280; symbol < 288; ++symbol) lengths[static_cast<std::size_t>(symbol)] = 8;
  Huffman lengths_code;
  Huffman distances_code;
  build(lengths_code, lengths.data(), 288);
  for (int symbol = 0; symbol < 30; ++symbol) lengths[static_cast<std::size_t>(symbol)] = 5;
  build(distances_code, lengths.data(), 30);
  return codes(lengths_code, distances_code);
}

VOLT_INLINE bool Decoder::dynamic() {
  static constexpr std::array<std::uint8_t, 19> order{16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};
  const int literal_count = bits(5) + 257;
  const int distance_count = bits(5) + 1;
  const int code_count = bits(4) + 4;
  if (failed_ || literal_count > 286 || distance_count > 30) return false;
  std::array<std::uint16_t, 320> lengths{};
  for (int i = 0; i < code_count; ++i) lengths[order[static_cast<std::size_t>(i)]] = static_cast<std::uint16_t>(bits(3));
  if (failed_) return false;
  Huffman length_code;
  if (!build(length_code, lengths.data(), 19)) return false;
  lengths.fill(0);
  int index = 0;
  while (index < literal_count + distance_count) {
    const int symbol = decode(length_code);
    if (failed_ || symbol < 0) return false;
    if (symbol < 16) {
      lengths[static_cast<std::size_t>(index++)] = static_cast<std::uint16_t>(symbol);
      continue;
    }
    std::uint16_t repeated = 0;
    int times = 0;
    if (symbol == 16) {
      if (index == 0) return false;
      repeated = lengths[static_cast<std::size_t>(index - 1)];
      times = 3 + bits(2);
    } else if (symbol == 17) {
      times = 3 + bits(3);
    } else {
      times = 11 + bits(7);
    }
    if (failed_ || index + times > literal_count + distance_count) return false;
    while (times-- > 0) lengths[static_cast<std::size_t>(index++)] = repeated;
  }
  if (lengths[256] == 0) return false;  // no end-of-block code
  Huffman lengths_code;
  Huffman distances_code;
  if (!build(lengths_code, lengths.data(), literal_count)) return false;
  if (!build(distances_code, lengths.data() + literal_count, distance_count)) return false;
  return codes(lengths_code, distances_code);
}

}  // namespace volt::detail::inflate

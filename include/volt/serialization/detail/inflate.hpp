/// \file
/// A small, bounds-checked raw DEFLATE decoder (RFC 1951), used to check the CRC-32 of the compressed entries
/// of a checkpoint's zip archive before LibTorch parses any of them. Written for checking, not speed: Huffman
/// codes are decoded a bit at a time from canonical code counts. Every read is checked against the input's
/// end, every back-reference against the output so far, and the output against a size limit; damaged input
/// gives std::nullopt, never a read or write out of bounds.
#pragma once

#include <volt/core/linkage.hpp>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace volt::detail::inflate {

/// A canonical Huffman code: how many codes of each length (1..15) and the symbols in code order.
struct Huffman {
  std::array<std::uint16_t, 16> count{};
  std::array<std::uint16_t, 320> symbol{};
};

class Decoder {
 public:
  Decoder(std::string_view input, std::size_t output_limit) : in_(input), limit_(output_limit) {}

  /// The inflated data, or std::nullopt when the stream is damaged, truncated or larger than the limit.
  std::optional<std::string> run();

 private:
  int bits(int need);

  bool stored();

  /// Builds `code` from the code lengths of `n` symbols; false for an over-subscribed set of lengths.
  /// Incomplete codes are allowed (a single distance code is legal); decode() rejects unused codes.
  static bool build(Huffman& code, const std::uint16_t* lengths, int n);

  int decode(const Huffman& code);

  bool codes(const Huffman& lengths_code, const Huffman& distances_code);

  bool fixed();

  bool dynamic();

  std::string_view in_;
  std::size_t limit_;
  std::size_t position_ = 0;
  std::uint32_t bit_buffer_ = 0;
  int bit_count_ = 0;
  bool failed_ = false;
  std::string out_;
};

/// Inflates the raw DEFLATE stream `input`, expecting at most `output_limit` bytes; std::nullopt when the
/// stream is damaged or larger.
VOLT_INLINE std::optional<std::string> raw(std::string_view input, std::size_t output_limit);

}  // namespace volt::detail::inflate

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/serialization/detail/impl/inflate.ipp>
#endif

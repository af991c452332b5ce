/// \file
/// Images for loggers: volt::make_image_grid (torchvision's make_grid) and volt::encode_png, a PNG encoder
/// without zlib. LibTorch does not expose a compressor, so the PNG holds its pixels in stored (uncompressed)
/// deflate blocks: about 3 bytes per RGB pixel, which TensorBoard and every PNG reader decode.
#pragma once

#include <volt/core/encoding.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace volt {

/// The options of make_image_grid (torchvision.utils.make_grid's arguments, without normalize).
struct ImageGridOptions {
  /// Images per row.
  std::int64_t nrow = 8;
  /// Pixels between images and around the grid.
  std::int64_t padding = 2;
  /// The value of the padding pixels.
  double pad_value = 0.0;
};

/// Lays out a batch of images (N, C, H, W) as one image (C, H', W') of `nrow` images per row, as
/// torchvision.utils.make_grid does: single-channel images become three-channel, a batch of one is returned
/// as that image, values are kept as they are (no normalization). A (C, H, W) image is returned unchanged.
/// Throws std::invalid_argument for other shapes, nrow < 1 or a negative padding.
inline torch::Tensor make_image_grid(const torch::Tensor& images, const ImageGridOptions& options = {}) {
  if (!images.defined() || (images.dim() != 3 && images.dim() != 4)) {
    throw std::invalid_argument("volt: make_image_grid expects images of shape (N, C, H, W) or (C, H, W), got " +
                                (images.defined() ? std::to_string(images.dim()) + " dimensions" : std::string("undefined")));
  }
  if (options.nrow < 1 || options.padding < 0) {
    throw std::invalid_argument("volt: make_image_grid: nrow must be >= 1 and padding >= 0 (got nrow=" +
                                std::to_string(options.nrow) + ", padding=" + std::to_string(options.padding) + ")");
  }
  if (images.dim() == 3) return images;
  auto batch = images.size(1) == 1 ? torch::cat({images, images, images}, 1) : images;
  if (batch.size(0) == 1) return batch[0];
  const std::int64_t count = batch.size(0);
  const std::int64_t columns = std::min(options.nrow, count);
  const std::int64_t rows = (count + columns - 1) / columns;
  const std::int64_t height = batch.size(2) + options.padding, width = batch.size(3) + options.padding;
  auto grid = torch::full({batch.size(1), rows * height + options.padding, columns * width + options.padding},
                          options.pad_value, batch.options());
  for (std::int64_t k = 0; k < count; ++k) {
    const std::int64_t y = k / columns, x = k % columns;
    grid.narrow(1, y * height + options.padding, height - options.padding)
        .narrow(2, x * width + options.padding, width - options.padding)
        .copy_(batch[k]);
  }
  return grid;
}

namespace detail::png {

using volt::detail::crc32;  // CRC-32 as PNG chunks use it (core/encoding.hpp)

inline void append_big_endian(std::string& out, std::uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((value >> shift) & 0xFFU));
}

inline void append_chunk(std::string& out, std::string_view type, std::string_view data) {
  append_big_endian(out, static_cast<std::uint32_t>(data.size()));
  std::string body(type);
  body.append(data);
  out += body;
  append_big_endian(out, crc32(body));
}

/// A zlib stream of `raw` in stored deflate blocks (at most 65,535 bytes each) with its Adler-32.
inline std::string zlib_stored(std::string_view raw) {
  std::string out("\x78\x01", 2);
  std::size_t at = 0;
  do {
    const std::size_t size = std::min<std::size_t>(raw.size() - at, 65535);
    const bool last = at + size == raw.size();
    out.push_back(static_cast<char>(last ? 1 : 0));
    out.push_back(static_cast<char>(size & 0xFFU));
    out.push_back(static_cast<char>(size >> 8));
    out.push_back(static_cast<char>(~size & 0xFFU));
    out.push_back(static_cast<char>((~size >> 8) & 0xFFU));
    out.append(raw.substr(at, size));
    at += size;
  } while (at < raw.size());
  std::uint32_t a = 1, b = 0;
  for (const char byte : raw) {
    a = (a + static_cast<unsigned char>(byte)) % 65521U;
    b = (b + a) % 65521U;
  }
  append_big_endian(out, b << 16 | a);
  return out;
}

}  // namespace detail::png

/// `image` as (H, W, C) uint8 on the CPU, C in {1, 3, 4}: from (C, H, W) or (H, W); floating-point values are
/// scaled by 255 and clipped to [0, 255] (then truncated, as torch.utils.tensorboard does), uint8 is kept.
/// Throws std::invalid_argument for another shape, channel count or dtype.
inline torch::Tensor image_to_hwc_uint8(const torch::Tensor& image) {
  if (!image.defined() || (image.dim() != 2 && image.dim() != 3)) {
    throw std::invalid_argument("volt: an image must have shape (C, H, W) or (H, W), got " +
                                (image.defined() ? std::to_string(image.dim()) + " dimensions" : std::string("undefined")));
  }
  auto chw = image.dim() == 2 ? image.unsqueeze(0) : image;
  const auto channels = chw.size(0);
  if (channels != 1 && channels != 3 && channels != 4) {
    throw std::invalid_argument("volt: an image must have 1, 3 or 4 channels (gray, RGB, RGBA), got " +
                                std::to_string(channels));
  }
  auto pixels = chw.detach().to(torch::kCPU);
  if (pixels.is_floating_point()) {
    pixels = (pixels.to(torch::kFloat) * 255.0F).clamp(0.0, 255.0).to(torch::kByte);
  } else if (pixels.scalar_type() != torch::kByte) {
    throw std::invalid_argument("volt: an image must be floating point (values in [0, 1]) or uint8, got " +
                                std::string(c10::toString(pixels.scalar_type())));
  }
  return pixels.permute({1, 2, 0}).contiguous();
}

/// The PNG file of `image` ((C, H, W) or (H, W); see image_to_hwc_uint8): 8 bits per channel, gray, RGB or
/// RGBA, no filtering, stored deflate blocks.
inline std::string encode_png(const torch::Tensor& image) {
  const auto hwc = image_to_hwc_uint8(image);
  const auto height = hwc.size(0), width = hwc.size(1), channels = hwc.size(2);
  if (height < 1 || width < 1) throw std::invalid_argument("volt: encode_png: the image is empty");
  const auto row_bytes = static_cast<std::size_t>(width * channels);
  const auto* pixels = static_cast<const char*>(hwc.data_ptr());
  std::string raw;
  raw.reserve(static_cast<std::size_t>(height) * (row_bytes + 1));
  for (std::int64_t y = 0; y < height; ++y) {
    raw.push_back('\0');  // filter type None
    raw.append(pixels + static_cast<std::size_t>(y) * row_bytes, row_bytes);
  }
  std::string header;
  detail::png::append_big_endian(header, static_cast<std::uint32_t>(width));
  detail::png::append_big_endian(header, static_cast<std::uint32_t>(height));
  const char color_type = channels == 1 ? 0 : channels == 3 ? 2 : 6;
  header += std::string{'\x08', color_type, '\0', '\0', '\0'};
  std::string png("\x89PNG\r\n\x1a\n", 8);
  detail::png::append_chunk(png, "IHDR", header);
  detail::png::append_chunk(png, "IDAT", detail::png::zlib_stored(raw));
  detail::png::append_chunk(png, "IEND", "");
  return png;
}

}  // namespace volt

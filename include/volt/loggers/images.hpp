/// \file
/// Images for loggers: volt::make_image_grid (torchvision's make_grid) and volt::encode_png, a PNG encoder
/// without zlib. LibTorch does not expose a compressor, so the PNG holds its pixels in stored (uncompressed)
/// deflate blocks: about 3 bytes per RGB pixel, which TensorBoard and every PNG reader decode.
#pragma once

#include <volt/core/linkage.hpp>
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
VOLT_INLINE torch::Tensor make_image_grid(const torch::Tensor& images, const ImageGridOptions& options = {});

namespace detail::png {

using volt::detail::crc32;  // CRC-32 as PNG chunks use it (core/encoding.hpp)

VOLT_INLINE void append_big_endian(std::string& out, std::uint32_t value);

VOLT_INLINE void append_chunk(std::string& out, std::string_view type, std::string_view data);

/// A zlib stream of `raw` in stored deflate blocks (at most 65,535 bytes each) with its Adler-32.
VOLT_INLINE std::string zlib_stored(std::string_view raw);

}  // namespace detail::png

/// `image` as (H, W, C) uint8 on the CPU, C in {1, 3, 4}: from (C, H, W) or (H, W); floating-point values are
/// scaled by 255 and clipped to [0, 255] (then truncated, as torch.utils.tensorboard does), uint8 is kept.
/// Throws std::invalid_argument for another shape, channel count or dtype.
VOLT_INLINE torch::Tensor image_to_hwc_uint8(const torch::Tensor& image);

/// The PNG file of `image` ((C, H, W) or (H, W); see image_to_hwc_uint8): 8 bits per channel, gray, RGB or
/// RGBA, no filtering, stored deflate blocks.
VOLT_INLINE std::string encode_png(const torch::Tensor& image);

}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/loggers/impl/images.ipp>
#endif

/// \file
/// Definitions of the functions declared in volt/loggers/images.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt {

VOLT_INLINE torch::Tensor make_image_grid(const torch::Tensor& images, const ImageGridOptions& options) {
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
}  // namespace volt

namespace volt::detail::png {

VOLT_INLINE void append_big_endian(std::string& out, std::uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((value >> shift) & 0xFFU));
}

VOLT_INLINE void append_chunk(std::string& out, std::string_view type, std::string_view data) {
  append_big_endian(out, static_cast<std::uint32_t>(data.size()));
  std::string body(type);
  body.append(data);
  out += body;
  append_big_endian(out, crc32(body));
}

VOLT_INLINE std::string zlib_stored(std::string_view raw) {
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
}  // namespace volt::detail::png

namespace volt {

VOLT_INLINE torch::Tensor image_to_hwc_uint8(const torch::Tensor& image) {
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

VOLT_INLINE std::string encode_png(const torch::Tensor& image) {
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

/// \file
/// Definitions of the functions declared in volt/serialization/detail/zip_reader.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE std::vector<ZipEntry> read_zip_entries(std::string_view bytes, const std::string& shown,
                                                   const std::string& noun) {
  const std::uint64_t size = bytes.size();
  const auto byte = [&](std::uint64_t at) { return static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[at])); };
  const auto u16 = [&](std::uint64_t at) { return byte(at) | byte(at + 1) << 8; };
  const auto u32 = [&](std::uint64_t at) { return u16(at) | u16(at + 2) << 16; };
  const auto u64 = [&](std::uint64_t at) { return u32(at) | u32(at + 4) << 32; };
  const auto damaged = [&](const std::string& what) {
    throw CheckpointError("volt: " + shown + " is not a readable " + noun + " (truncated or corrupted, " +
                          std::to_string(size) + " bytes): " + what);
  };
  // The end-of-central-directory record: 22 bytes plus a comment of at most 65535 bytes, at the end.
  std::uint64_t end_record = size;
  for (std::uint64_t back = 22; back <= size && back <= 22 + 65535; ++back) {
    if (u32(size - back) == 0x06054b50U) {
      end_record = size - back;
      break;
    }
  }
  if (end_record == size) damaged("no zip end-of-archive record (the end of the file is missing)");
  std::uint64_t entries = u16(end_record + 10);
  std::uint64_t directory_size = u32(end_record + 12);
  std::uint64_t directory_offset = u32(end_record + 16);
  std::uint64_t directory_end = end_record;
  if (entries == 0xFFFFU || directory_size == 0xFFFFFFFFU || directory_offset == 0xFFFFFFFFU) {
    // Zip64: a locator (20 bytes) just before the end record points at the zip64 end record (56 bytes).
    if (end_record < 20 || u32(end_record - 20) != 0x07064b50U) damaged("the zip64 end-of-archive locator is missing");
    const std::uint64_t record = u64(end_record - 12);
    if (record > end_record - 20 || end_record - 20 - record < 56 || u32(record) != 0x06064b50U) {
      damaged("the zip64 end-of-archive record is damaged");
    }
    entries = u64(record + 32);
    directory_size = u64(record + 40);
    directory_offset = u64(record + 48);
    directory_end = record;
  }
  if (directory_offset > directory_end || directory_size > directory_end - directory_offset) {
    damaged("the zip directory lies outside the file");
  }
  if (entries > directory_size / 46) damaged("the zip directory is damaged");
  std::vector<ZipEntry> result;
  result.reserve(static_cast<std::size_t>(entries));
  std::uint64_t at = directory_offset;
  const std::uint64_t limit = directory_offset + directory_size;
  for (std::uint64_t entry = 0; entry < entries; ++entry) {
    if (limit - at < 46 || u32(at) != 0x02014b50U) damaged("the zip directory is damaged");
    const std::uint64_t method = u16(at + 10);
    const std::uint64_t crc = u32(at + 16);
    std::uint64_t stored_size = u32(at + 20);
    std::uint64_t inflated_size = u32(at + 24);
    const std::uint64_t name_size = u16(at + 28);
    const std::uint64_t extra_size = u16(at + 30);
    const std::uint64_t comment_size = u16(at + 32);
    std::uint64_t local = u32(at + 42);
    if (limit - at - 46 < name_size + extra_size + comment_size) damaged("the zip directory is damaged");
    ZipEntry read;
    read.name = std::string(bytes.substr(at + 46, name_size));
    // Zip64 sizes and offset, in that order, for the fields that hold 0xFFFFFFFF.
    for (std::uint64_t extra = at + 46 + name_size, extra_end = extra + extra_size; extra_end - extra >= 4;) {
      const std::uint64_t id = u16(extra);
      const std::uint64_t length = u16(extra + 2);
      if (extra_end - extra - 4 < length) damaged("the entry '" + read.name + "' has a damaged extra field");
      if (id == 0x0001U) {
        std::uint64_t field = extra + 4;
        const auto next = [&](std::uint64_t& value) {
          if (value != 0xFFFFFFFFU) return;
          if (extra + 4 + length - field < 8) damaged("the entry '" + read.name + "' has a damaged zip64 field");
          value = u64(field);
          field += 8;
        };
        next(inflated_size);
        next(stored_size);
        next(local);
      }
      extra += 4 + length;
    }
    at += 46 + name_size + extra_size + comment_size;
    if (local > size || size - local < 30 || u32(local) != 0x04034b50U) {
      damaged("the entry '" + read.name + "' has no valid local header");
    }
    const std::uint64_t data = local + 30 + u16(local + 26) + u16(local + 28);
    if (data > size || stored_size > size - data) damaged("the entry '" + read.name + "' is cut off");
    read.stored = bytes.substr(data, stored_size);
    if (method == 8) {  // deflated (LibTorch compresses an archive's code/*.py): inflated here and checked
      if (inflated_size > (std::uint64_t{1} << 32)) damaged("the compressed entry '" + read.name + "' is too large");
      auto inflated = inflate::raw(read.stored, inflated_size);
      if (!inflated || inflated->size() != inflated_size) damaged("the compressed entry '" + read.name + "' is damaged");
      read.inflated = std::move(*inflated);
      read.deflated = true;
    } else if (method != 0) {
      damaged("the entry '" + read.name + "' uses an unknown compression method " + std::to_string(method));
    } else if (inflated_size != stored_size) {
      damaged("the entry '" + read.name + "' has different stored and original sizes");
    }
    if (crc32(read.content()) != crc) damaged("the entry '" + read.name + "' fails its CRC-32 check");
    result.push_back(std::move(read));
  }
  return result;
}

}  // namespace volt::detail

/// \file
/// The safetensors header: its dtype names, the checks of every length and offset, and the writer of the
/// header Python's `safetensors` package writes. The JSON itself: volt/serialization/detail/safetensors_json.hpp.
///
/// What the checks accept beyond the JSON reader: a top-level object starting with '{', a null
/// `__metadata__` (string values only), unknown members of a tensor entry skipped; refused: duplicate keys,
/// text after the object other than whitespace, unknown dtypes, byte counts that do not match dtype and shape,
/// offsets with gaps, overlaps or past the end of the data.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/serialization/detail/safetensors_json.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace volt::detail::safetensors {

/// A dtype of the format: its name in the header, the element size in bits, its rank in the data order
/// Python's package writes (higher first), and the c10 name of the LibTorch type ("" where LibTorch has none).
struct DType {
  std::string_view name;
  int bits;
  int rank;
  std::string_view torch_name;
};

/// Every dtype the format names (safetensors 0.8), ranked as the Rust crate's Dtype enum declares them.
inline constexpr DType dtypes[] = {
    {"BOOL", 8, 0, "Bool"},
    {"F4", 4, 1, "Float4_e2m1fn_x2"},
    {"F6_E2M3", 6, 2, ""},
    {"F6_E3M2", 6, 3, ""},
    {"U8", 8, 4, "Byte"},
    {"I8", 8, 5, "Char"},
    {"F8_E5M2", 8, 6, "Float8_e5m2"},
    {"F8_E4M3", 8, 7, "Float8_e4m3fn"},
    {"F8_E8M0", 8, 8, "Float8_e8m0fnu"},
    {"F8_E4M3FNUZ", 8, 9, "Float8_e4m3fnuz"},
    {"F8_E5M2FNUZ", 8, 10, "Float8_e5m2fnuz"},
    {"I16", 16, 11, "Short"},
    {"U16", 16, 12, "UInt16"},
    {"F16", 16, 13, "Half"},
    {"BF16", 16, 14, "BFloat16"},
    {"I32", 32, 15, "Int"},
    {"U32", 32, 16, "UInt32"},
    {"F32", 32, 17, "Float"},
    {"C64", 64, 18, "ComplexFloat"},
    {"F64", 64, 19, "Double"},
    {"I64", 64, 20, "Long"},
    {"U64", 64, 21, "UInt64"},
};

VOLT_INLINE const DType* find_dtype(std::string_view name);

/// The format's dtype names, for messages ("BOOL, F4, ...").
VOLT_INLINE std::string dtype_names();

/// The largest header the reader accepts (the Rust crate's limit).
inline constexpr std::uint64_t max_header_size = 100'000'000;
/// One tensor of the header: name, dtype, shape and its byte range in the data that follows the header.
struct Entry {
  std::string name;
  const DType* dtype = nullptr;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

/// The header of a file: its tensors in data order and its `__metadata__` (empty when absent or null).
struct Header {
  std::vector<Entry> tensors;
  std::map<std::string, std::string> metadata;
};

/// Reads one tensor entry ({"dtype": ..., "shape": [...], "data_offsets": [begin, end]}, other members skipped).
VOLT_INLINE Entry read_entry(JsonReader& json, std::string name);

/// The bytes a tensor of `entry`'s dtype and shape takes; throws when the count overflows 64 bits or is not
/// a whole number of bytes.
VOLT_INLINE std::uint64_t byte_size(const Entry& entry);

/// Parses and checks the header text `json` of a file whose data (after the header) holds `data_size` bytes:
/// a JSON object starting with '{', every tensor's byte count matching dtype and shape, the tensors' ranges
/// following each other from 0 without gap or overlap and ending at `data_size`. Throws SafetensorsError
/// saying what is wrong (without the file's name, which the caller adds).
VOLT_INLINE Header parse_header(std::string_view json, std::uint64_t data_size);

/// The header bytes for `entries` (in data order, offsets set) and `metadata`: the 8-byte little-endian
/// length, then compact JSON padded with spaces to a multiple of 8 bytes, as Python's package writes it
/// (`__metadata__` first and only when not empty).
VOLT_INLINE std::string write_header(const std::vector<Entry>& entries, const std::map<std::string, std::string>& metadata);

}  // namespace volt::detail::safetensors

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/serialization/detail/impl/safetensors_header.ipp>
#endif

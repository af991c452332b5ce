/// \file
/// The safetensors header: its dtype names, the checks of every length and offset, and the writer of the
/// header Python's `safetensors` package writes. The JSON itself: volt/serialization/detail/safetensors_json.hpp.
///
/// What the checks accept beyond the JSON reader: a top-level object starting with '{', a null
/// `__metadata__` (string values only), unknown members of a tensor entry skipped; refused: duplicate keys,
/// text after the object other than whitespace, unknown dtypes, byte counts that do not match dtype and shape,
/// offsets with gaps, overlaps or past the end of the data.
#pragma once

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

inline const DType* find_dtype(std::string_view name) {
  for (const auto& dtype : dtypes) {
    if (dtype.name == name) return &dtype;
  }
  return nullptr;
}

/// The format's dtype names, for messages ("BOOL, F4, ...").
inline std::string dtype_names() {
  std::string text;
  for (const auto& dtype : dtypes) text += (text.empty() ? "" : ", ") + std::string(dtype.name);
  return text;
}

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
inline Entry read_entry(JsonReader& json, std::string name) {
  Entry entry;
  entry.name = std::move(name);
  const std::string who = "the tensor \"" + entry.name + "\"";
  bool has_dtype = false, has_shape = false, has_offsets = false;
  json.expect('{');
  if (!json.consume('}')) {
    do {
      const std::string key = json.read_string();
      json.expect(':');
      const auto once = [&](bool& seen) {
        if (seen) throw SafetensorsError(who + " has \"" + key + "\" twice");
        seen = true;
      };
      if (key == "dtype") {
        once(has_dtype);
        const std::string dtype = json.read_string();
        entry.dtype = find_dtype(dtype);
        if (entry.dtype == nullptr) {
          throw SafetensorsError(who + " has the unknown dtype \"" + dtype + "\" (the format's dtypes: " +
                                 dtype_names() + ")");
        }
      } else if (key == "shape") {
        once(has_shape);
        for (const std::uint64_t size : json.read_uint_array()) {
          if (size > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
            throw SafetensorsError(who + " has a dimension of " + std::to_string(size) + ", over 2^63 - 1");
          }
          entry.shape.push_back(static_cast<std::int64_t>(size));
        }
      } else if (key == "data_offsets") {
        once(has_offsets);
        const auto offsets = json.read_uint_array();
        if (offsets.size() != 2) {
          throw SafetensorsError(who + " has " + std::to_string(offsets.size()) +
                                 " data_offsets; expected 2 ([begin, end])");
        }
        entry.begin = offsets[0];
        entry.end = offsets[1];
      } else {
        json.skip_value(2);
      }
    } while (json.consume(','));
    json.expect('}');
  }
  if (!has_dtype || !has_shape || !has_offsets) {
    throw SafetensorsError(who + " lacks \"" + std::string(!has_dtype ? "dtype" : !has_shape ? "shape" : "data_offsets") +
                           "\"");
  }
  return entry;
}

/// The bytes a tensor of `entry`'s dtype and shape takes; throws when the count overflows 64 bits or is not
/// a whole number of bytes.
inline std::uint64_t byte_size(const Entry& entry) {
  std::uint64_t elements = 1;
  for (const std::int64_t size : entry.shape) {
    const auto dim = static_cast<std::uint64_t>(size);
    if (dim != 0 && elements > std::numeric_limits<std::uint64_t>::max() / dim) {
      throw SafetensorsError("the tensor \"" + entry.name + "\" has more elements than 64 bits count");
    }
    elements *= dim;
  }
  const auto bits = static_cast<std::uint64_t>(entry.dtype->bits);
  if (elements > std::numeric_limits<std::uint64_t>::max() / bits) {
    throw SafetensorsError("the tensor \"" + entry.name + "\" has more bytes than 64 bits count");
  }
  if (elements * bits % 8 != 0) {
    throw SafetensorsError("the tensor \"" + entry.name + "\" (" + std::string(entry.dtype->name) + ", " +
                           std::to_string(elements) + " elements) does not fill a whole number of bytes");
  }
  return elements * bits / 8;
}

/// Parses and checks the header text `json` of a file whose data (after the header) holds `data_size` bytes:
/// a JSON object starting with '{', every tensor's byte count matching dtype and shape, the tensors' ranges
/// following each other from 0 without gap or overlap and ending at `data_size`. Throws SafetensorsError
/// saying what is wrong (without the file's name, which the caller adds).
inline Header parse_header(std::string_view json, std::uint64_t data_size) {
  if (!valid_utf8(json)) throw SafetensorsError("the JSON header is not valid UTF-8");
  if (json.empty() || json.front() != '{') throw SafetensorsError("the JSON header does not start with '{'");
  JsonReader reader(json);
  Header header;
  bool has_metadata = false;
  std::map<std::string, bool> names;
  reader.expect('{');
  if (!reader.consume('}')) {
    do {
      std::string key = reader.read_string();
      reader.expect(':');
      if (key == "__metadata__") {
        if (has_metadata) throw SafetensorsError("the header has \"__metadata__\" twice");
        has_metadata = true;
        if (reader.literal("null")) continue;
        reader.expect('{');
        if (reader.consume('}')) continue;
        do {
          std::string name = reader.read_string();
          reader.expect(':');
          if (reader.peek() != '"') {
            throw SafetensorsError("the __metadata__ value of \"" + name + "\" is not a string (the format "
                                   "allows string values only)");
          }
          if (!header.metadata.emplace(name, reader.read_string()).second) {
            throw SafetensorsError("the __metadata__ has the key \"" + name + "\" twice");
          }
        } while (reader.consume(','));
        reader.expect('}');
        continue;
      }
      if (!names.emplace(key, true).second) throw SafetensorsError("the header has the tensor \"" + key + "\" twice");
      header.tensors.push_back(read_entry(reader, std::move(key)));
    } while (reader.consume(','));
    reader.expect('}');
  }
  if (!reader.at_end()) reader.fail("text after the header's closing '}'");

  std::sort(header.tensors.begin(), header.tensors.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::uint64_t expected = 0;
  for (const auto& entry : header.tensors) {
    const std::string who = "the tensor \"" + entry.name + "\"";
    const auto range = "[" + std::to_string(entry.begin) + ", " + std::to_string(entry.end) + "]";
    if (entry.end < entry.begin) throw SafetensorsError(who + " has data_offsets " + range + " that end before they begin");
    if (entry.begin != expected) {
      throw SafetensorsError(who + " has data_offsets " + range + " but the previous tensor ends at " +
                             std::to_string(expected) + " (the data must follow without gaps or overlaps)");
    }
    const std::uint64_t size = byte_size(entry);
    if (entry.end - entry.begin != size) {
      throw SafetensorsError(who + " has data_offsets " + range + " (" + std::to_string(entry.end - entry.begin) +
                             " bytes) but its dtype " + std::string(entry.dtype->name) + " and shape need " +
                             std::to_string(size) + " bytes");
    }
    if (entry.end > data_size) {
      throw SafetensorsError(who + " has data_offsets " + range + " past the end of the data (" +
                             std::to_string(data_size) + " bytes)");
    }
    expected = entry.end;
  }
  if (expected != data_size) {
    throw SafetensorsError("the tensors cover " + std::to_string(expected) + " bytes of data but the file holds " +
                           std::to_string(data_size) + " bytes after the header");
  }
  return header;
}

/// The header bytes for `entries` (in data order, offsets set) and `metadata`: the 8-byte little-endian
/// length, then compact JSON padded with spaces to a multiple of 8 bytes, as Python's package writes it
/// (`__metadata__` first and only when not empty).
inline std::string write_header(const std::vector<Entry>& entries, const std::map<std::string, std::string>& metadata) {
  std::string json = "{";
  if (!metadata.empty()) {
    json += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [key, value] : metadata) {
      if (!first) json += ',';
      first = false;
      append_json_string(json, key);
      json += ':';
      append_json_string(json, value);
    }
    json += '}';
  }
  for (const auto& entry : entries) {
    if (json.size() > 1) json += ',';
    append_json_string(json, entry.name);
    json += ":{\"dtype\":\"" + std::string(entry.dtype->name) + "\",\"shape\":[";
    for (std::size_t i = 0; i < entry.shape.size(); ++i) json += (i ? "," : "") + std::to_string(entry.shape[i]);
    json += "],\"data_offsets\":[" + std::to_string(entry.begin) + "," + std::to_string(entry.end) + "]}";
  }
  json += '}';
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  auto length = static_cast<std::uint64_t>(json.size());
  for (int i = 0; i < 8; ++i, length >>= 8) out[static_cast<std::size_t>(i)] = static_cast<char>(length & 0xFF);
  return out + json;
}

}  // namespace volt::detail::safetensors

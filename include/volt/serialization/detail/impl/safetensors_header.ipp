/// \file
/// Definitions of the functions declared in volt/serialization/detail/safetensors_header.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail::safetensors {

VOLT_INLINE const DType* find_dtype(std::string_view name) {
  for (const auto& dtype : dtypes) {
    if (dtype.name == name) return &dtype;
  }
  return nullptr;
}

VOLT_INLINE std::string dtype_names() {
  std::string text;
  for (const auto& dtype : dtypes) text += (text.empty() ? "" : ", ") + std::string(dtype.name);
  return text;
}

VOLT_INLINE Entry read_entry(JsonReader& json, std::string name) {
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

VOLT_INLINE std::uint64_t byte_size(const Entry& entry) {
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

VOLT_INLINE Header parse_header(std::string_view json, std::uint64_t data_size) {
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

VOLT_INLINE std::string write_header(const std::vector<Entry>& entries, const std::map<std::string, std::string>& metadata) {
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
    for (std::size_t i = 0; i < entry.shape.size(); ++i) {
      if (i > 0) json += ',';
      json += std::to_string(entry.shape[i]);  // (not `"," + to_string`: g++ 12 -O3 warns -Wrestrict on it)
    }
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

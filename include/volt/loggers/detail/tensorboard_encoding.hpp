/// \file
/// The encoding of TensorBoard event files, by hand so that volt needs no protobuf library: CRC-32C and
/// TFRecord framing, a protocol-buffer writer, and the Summary values volt::TensorBoardLogger writes (scalars,
/// images, histograms, text, the hparams plugin's experiment, session start and session end).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#if !defined(_WIN32)
#include <unistd.h>
#endif

namespace volt {

namespace detail::tensorboard {

/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as TFRecord uses.
inline std::uint32_t crc32c(std::string_view bytes) {
  static const std::array<std::uint32_t, 256> table = [] {
    std::array<std::uint32_t, 256> result{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t crc = i;
      for (int bit = 0; bit < 8; ++bit) crc = (crc & 1U) != 0 ? (crc >> 1) ^ 0x82F63B78U : crc >> 1;
      result[i] = crc;
    }
    return result;
  }();
  std::uint32_t crc = 0xFFFFFFFFU;
  for (const char byte : bytes) crc = table[(crc ^ static_cast<unsigned char>(byte)) & 0xFFU] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFU;
}

/// TFRecord's masked CRC: rotate right by 15 bits and add a constant.
inline std::uint32_t masked_crc32c(std::string_view bytes) {
  const std::uint32_t crc = crc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + 0xA282EAD8U;
}

inline void append_little_endian(std::string& out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFFU));
}

/// One TFRecord: length (u64 LE), masked CRC of the length bytes, payload, masked CRC of the payload.
inline std::string tfrecord(std::string_view payload) {
  std::string length;
  append_little_endian(length, payload.size(), 8);
  std::string record = length;
  append_little_endian(record, masked_crc32c(length), 4);
  record.append(payload);
  append_little_endian(record, masked_crc32c(payload), 4);
  return record;
}

/// Protocol-buffer wire format writer (varint, 64-bit, length-delimited and 32-bit fields).
class ProtoWriter {
 public:
  void varint_field(int field, std::uint64_t value) {
    key(field, 0);
    varint(value);
  }
  void double_field(int field, double value) {
    key(field, 1);
    std::uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof bits);
    append_little_endian(bytes_, bits, 8);
  }
  void float_field(int field, float value) {
    key(field, 5);
    std::uint32_t bits = 0;
    std::memcpy(&bits, &value, sizeof bits);
    append_little_endian(bytes_, bits, 4);
  }
  void bytes_field(int field, std::string_view value) {
    key(field, 2);
    varint(value.size());
    bytes_.append(value);
  }
  const std::string& bytes() const { return bytes_; }

 private:
  void key(int field, int wire_type) { varint((static_cast<std::uint64_t>(field) << 3) | static_cast<std::uint64_t>(wire_type)); }
  void varint(std::uint64_t value) {
    while (value >= 0x80U) {
      bytes_.push_back(static_cast<char>((value & 0x7FU) | 0x80U));
      value >>= 7;
    }
    bytes_.push_back(static_cast<char>(value));
  }
  std::string bytes_;
};

// Field numbers of tensorflow/core/util/event.proto, tensorflow/core/framework/summary.proto,
// tensorboard/plugins/hparams/plugin_data.proto and google/protobuf/struct.proto.
inline constexpr int event_wall_time = 1, event_step = 2, event_file_version = 3, event_summary = 5;
inline constexpr int summary_value = 1;
inline constexpr int value_tag = 1, value_simple_value = 2, value_metadata = 9;
inline constexpr int metadata_plugin_data = 1;
inline constexpr int plugin_name = 1, plugin_content = 2;
inline constexpr int hparams_version = 1, hparams_session_start_info = 3;
inline constexpr int session_hparams = 1, session_group_name = 4, session_start_time_secs = 5;
inline constexpr int map_key = 1, map_value = 2;
inline constexpr int struct_number_value = 2, struct_string_value = 3, struct_bool_value = 4;

/// An Event: wall time, step, then the already serialized fields of `body_fields`.
inline std::string event(double wall_time, std::int64_t step, const ProtoWriter& body_fields) {
  ProtoWriter event;
  event.double_field(event_wall_time, wall_time);
  event.varint_field(event_step, static_cast<std::uint64_t>(step));
  return event.bytes() + body_fields.bytes();
}

inline std::string scalar_value(std::string_view tag, double value) {
  ProtoWriter entry;
  entry.bytes_field(value_tag, tag);
  entry.float_field(value_simple_value, static_cast<float>(value));
  return entry.bytes();
}

/// A google.protobuf.Value for a hyperparameter: a number when the whole text parses as a finite number,
/// a bool for "true"/"false"/"True"/"False", else a string (what torch's hparams() does for Python values).
inline std::string hparam_value(const std::string& text) {
  ProtoWriter value;
  if (text == "true" || text == "True" || text == "false" || text == "False") {
    value.varint_field(struct_bool_value, text == "true" || text == "True" ? 1 : 0);
    return value.bytes();
  }
  try {
    std::size_t used = 0;
    const double number = std::stod(text, &used);
    if (used == text.size() && number == number && number - number == 0.0) {
      value.double_field(struct_number_value, number);
      return value.bytes();
    }
  } catch (const std::exception&) {
    // not a number
  }
  value.bytes_field(struct_string_value, text);
  return value.bytes();
}

/// The hparams plugin's Summary.Value "_hparams_/session_start_info" (metadata only, as torch writes it).
inline std::string session_start_info_value(const std::map<std::string, std::string>& params, double start_time) {
  ProtoWriter session;
  for (const auto& [key, text] : params) {
    ProtoWriter entry;
    entry.bytes_field(map_key, key);
    entry.bytes_field(map_value, hparam_value(text));
    session.bytes_field(session_hparams, entry.bytes());
  }
  session.bytes_field(session_group_name, "");
  session.double_field(session_start_time_secs, start_time);
  ProtoWriter plugin_data;
  plugin_data.varint_field(hparams_version, 0);
  plugin_data.bytes_field(hparams_session_start_info, session.bytes());
  ProtoWriter plugin;
  plugin.bytes_field(plugin_name, "hparams");
  plugin.bytes_field(plugin_content, plugin_data.bytes());
  ProtoWriter metadata;
  metadata.bytes_field(metadata_plugin_data, plugin.bytes());
  ProtoWriter value;
  value.bytes_field(value_tag, "_hparams_/session_start_info");
  value.bytes_field(value_metadata, metadata.bytes());
  return value.bytes();
}

inline double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

inline std::string host_name() {
#if !defined(_WIN32)
  std::array<char, 256> name{};
  if (::gethostname(name.data(), name.size() - 1) == 0) return std::string(name.data());
#endif
  return "localhost";
}

inline long process_id() {
#if !defined(_WIN32)
  return static_cast<long>(::getpid());
#else
  return 0;
#endif
}

/// tensorboard's per-process counter of event files (the last part of the file name).
inline int next_file_uid() {
  static int uid = 0;
  return uid++;
}


// Field numbers for images, histograms, text and the rest of the hparams plugin (summary.proto, tensor.proto,
// tensor_shape.proto, tensorboard/plugins/hparams/api.proto and plugin_data.proto).
inline constexpr int value_image = 4, value_histo = 5, value_tensor = 8;
inline constexpr int image_height = 1, image_width = 2, image_colorspace = 3, image_encoded = 4;
inline constexpr int histo_min = 1, histo_max = 2, histo_num = 3, histo_sum = 4, histo_sum_squares = 5,
                     histo_bucket_limit = 6, histo_bucket = 7;
inline constexpr int tensor_dtype = 1, tensor_shape = 2, tensor_string_val = 8, shape_dim = 2, dim_size = 1;
inline constexpr int dt_string = 7;
inline constexpr int hparams_experiment = 2, hparams_session_end_info = 4;
inline constexpr int experiment_hparam_infos = 4, experiment_metric_infos = 5;
inline constexpr int hparam_info_name = 1, hparam_info_type = 4, metric_info_name = 1, metric_name_tag = 2;
inline constexpr int data_type_string = 1, data_type_bool = 2, data_type_float64 = 3;
inline constexpr int session_end_status = 1, status_success = 1;

/// A Summary.Value with `tag` and plugin metadata naming `plugin` with `content`, plus the serialized
/// `payload_fields` (a value's data: image, histo, tensor).
inline std::string plugin_value(std::string_view tag, std::string_view plugin, std::string_view content,
                                const std::string& payload_fields = {}) {
  ProtoWriter plugin_data;
  plugin_data.bytes_field(plugin_name, plugin);
  if (!content.empty()) plugin_data.bytes_field(plugin_content, content);
  ProtoWriter metadata;
  metadata.bytes_field(metadata_plugin_data, plugin_data.bytes());
  ProtoWriter value;
  value.bytes_field(value_tag, tag);
  value.bytes_field(value_metadata, metadata.bytes());
  return value.bytes() + payload_fields;
}

/// An hparams plugin value: HParamsPluginData{version 0, `field` = `message`} under `tag`.
inline std::string hparams_value(std::string_view tag, int field, const std::string& message) {
  ProtoWriter data;
  data.varint_field(hparams_version, 0);
  data.bytes_field(field, message);
  return plugin_value(tag, "hparams", data.bytes());
}

/// "_hparams_/experiment": the names and types of the hyperparameters and the metric tags (what
/// torch.utils.tensorboard.summary.hparams writes), which TensorBoard's HPARAMS tab shows as columns.
inline std::string experiment_value(const std::map<std::string, std::string>& params,
                                    const std::map<std::string, double>& metrics) {
  ProtoWriter experiment;
  for (const auto& [key, text] : params) {
    const std::string encoded = hparam_value(text);
    const int kind = static_cast<unsigned char>(encoded.front()) >> 3;  // the google.protobuf.Value field
    ProtoWriter info;
    info.bytes_field(hparam_info_name, key);
    info.varint_field(hparam_info_type, kind == struct_number_value ? data_type_float64
                                        : kind == struct_bool_value ? data_type_bool : data_type_string);
    experiment.bytes_field(experiment_hparam_infos, info.bytes());
  }
  for (const auto& [key, value] : metrics) {
    ProtoWriter name;
    name.bytes_field(metric_name_tag, key);
    ProtoWriter info;
    info.bytes_field(metric_info_name, name.bytes());
    experiment.bytes_field(experiment_metric_infos, info.bytes());
  }
  return hparams_value("_hparams_/experiment", hparams_experiment, experiment.bytes());
}

/// "_hparams_/session_end_info" with STATUS_SUCCESS.
inline std::string session_end_info_value() {
  ProtoWriter end;
  end.varint_field(session_end_status, status_success);
  return hparams_value("_hparams_/session_end_info", hparams_session_end_info, end.bytes());
}

/// A Summary.Value holding a PNG image (Summary.Image: height, width, colorspace = channels, the PNG bytes).
inline std::string image_value(std::string_view tag, std::int64_t height, std::int64_t width, int channels,
                               const std::string& png) {
  ProtoWriter image;
  image.varint_field(image_height, static_cast<std::uint64_t>(height));
  image.varint_field(image_width, static_cast<std::uint64_t>(width));
  image.varint_field(image_colorspace, static_cast<std::uint64_t>(channels));
  image.bytes_field(image_encoded, png);
  ProtoWriter value;
  value.bytes_field(value_tag, tag);
  value.bytes_field(value_image, image.bytes());
  return value.bytes();
}

/// A Summary.Value holding a HistogramProto: min, max, count, sum, sum of squares, then the buckets' right
/// edges and counts as packed doubles.
inline std::string histogram_value(std::string_view tag, double min, double max, double num, double sum,
                                   double sum_squares, const std::vector<double>& limits,
                                   const std::vector<double>& counts) {
  const auto packed = [](const std::vector<double>& values) {
    std::string bytes;
    for (const double value : values) {
      std::uint64_t bits = 0;
      std::memcpy(&bits, &value, sizeof bits);
      append_little_endian(bytes, bits, 8);
    }
    return bytes;
  };
  ProtoWriter histo;
  histo.double_field(histo_min, min);
  histo.double_field(histo_max, max);
  histo.double_field(histo_num, num);
  histo.double_field(histo_sum, sum);
  histo.double_field(histo_sum_squares, sum_squares);
  histo.bytes_field(histo_bucket_limit, packed(limits));
  histo.bytes_field(histo_bucket, packed(counts));
  ProtoWriter value;
  value.bytes_field(value_tag, tag);
  value.bytes_field(value_histo, histo.bytes());
  return value.bytes();
}

/// A Summary.Value of the text plugin: a one-element DT_STRING TensorProto (what torch's add_text writes).
inline std::string text_value(std::string_view tag, std::string_view text) {
  ProtoWriter dim;
  dim.varint_field(dim_size, 1);
  ProtoWriter shape;
  shape.bytes_field(shape_dim, dim.bytes());
  ProtoWriter tensor;
  tensor.varint_field(tensor_dtype, dt_string);
  tensor.bytes_field(tensor_shape, shape.bytes());
  tensor.bytes_field(tensor_string_val, text);
  ProtoWriter payload;
  payload.bytes_field(value_tensor, tensor.bytes());
  return plugin_value(tag, "text", "", payload.bytes());
}

}  // namespace detail::tensorboard

}  // namespace volt

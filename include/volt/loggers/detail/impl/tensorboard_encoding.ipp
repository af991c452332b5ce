/// \file
/// Definitions of the functions declared in volt/loggers/detail/tensorboard_encoding.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail::tensorboard {

VOLT_INLINE std::uint32_t crc32c(std::string_view bytes) {
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

VOLT_INLINE std::uint32_t masked_crc32c(std::string_view bytes) {
  const std::uint32_t crc = crc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + 0xA282EAD8U;
}

VOLT_INLINE void append_little_endian(std::string& out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFFU));
}

VOLT_INLINE std::string tfrecord(std::string_view payload) {
  std::string length;
  append_little_endian(length, payload.size(), 8);
  std::string record = length;
  append_little_endian(record, masked_crc32c(length), 4);
  record.append(payload);
  append_little_endian(record, masked_crc32c(payload), 4);
  return record;
}

VOLT_INLINE std::string event(double wall_time, std::int64_t step, const ProtoWriter& body_fields) {
  ProtoWriter event;
  event.double_field(event_wall_time, wall_time);
  event.varint_field(event_step, static_cast<std::uint64_t>(step));
  return event.bytes() + body_fields.bytes();
}

VOLT_INLINE std::string scalar_value(std::string_view tag, double value) {
  ProtoWriter entry;
  entry.bytes_field(value_tag, tag);
  entry.float_field(value_simple_value, static_cast<float>(value));
  return entry.bytes();
}

VOLT_INLINE std::string hparam_value(const std::string& text) {
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

VOLT_INLINE std::string session_start_info_value(const std::map<std::string, std::string>& params, double start_time) {
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

VOLT_INLINE double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

VOLT_INLINE std::string host_name() {
#if !defined(_WIN32)
  std::array<char, 256> name{};
  if (::gethostname(name.data(), name.size() - 1) == 0) return std::string(name.data());
#endif
  return "localhost";
}

VOLT_INLINE long process_id() {
#if !defined(_WIN32)
  return static_cast<long>(::getpid());
#else
  return 0;
#endif
}

VOLT_INLINE int next_file_uid() {
  static int uid = 0;
  return uid++;
}

VOLT_INLINE std::string plugin_value(std::string_view tag, std::string_view plugin, std::string_view content,
                                     const std::string& payload_fields) {
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

VOLT_INLINE std::string hparams_value(std::string_view tag, int field, const std::string& message) {
  ProtoWriter data;
  data.varint_field(hparams_version, 0);
  data.bytes_field(field, message);
  return plugin_value(tag, "hparams", data.bytes());
}

VOLT_INLINE std::string experiment_value(const std::map<std::string, std::string>& params,
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

VOLT_INLINE std::string session_end_info_value() {
  ProtoWriter end;
  end.varint_field(session_end_status, status_success);
  return hparams_value("_hparams_/session_end_info", hparams_session_end_info, end.bytes());
}

VOLT_INLINE std::string image_value(std::string_view tag, std::int64_t height, std::int64_t width, int channels,
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

VOLT_INLINE std::string histogram_value(std::string_view tag, double min, double max, double num, double sum,
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

VOLT_INLINE std::string text_value(std::string_view tag, std::string_view text) {
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

VOLT_INLINE void ProtoWriter::varint_field(int field, std::uint64_t value) {
  key(field, 0);
  varint(value);
}

VOLT_INLINE void ProtoWriter::double_field(int field, double value) {
  key(field, 1);
  std::uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  append_little_endian(bytes_, bits, 8);
}

VOLT_INLINE void ProtoWriter::float_field(int field, float value) {
  key(field, 5);
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  append_little_endian(bytes_, bits, 4);
}

VOLT_INLINE void ProtoWriter::bytes_field(int field, std::string_view value) {
  key(field, 2);
  varint(value.size());
  bytes_.append(value);
}

VOLT_INLINE void ProtoWriter::varint(std::uint64_t value) {
  while (value >= 0x80U) {
    bytes_.push_back(static_cast<char>((value & 0x7FU) | 0x80U));
    value >>= 7;
  }
  bytes_.push_back(static_cast<char>(value));
}

}  // namespace volt::detail::tensorboard

/// \file
/// The encoding of TensorBoard event files, by hand so that volt needs no protobuf library: CRC-32C and
/// TFRecord framing, a protocol-buffer writer, and the Summary values volt::TensorBoardLogger writes (scalars,
/// images, histograms, text, the hparams plugin's experiment, session start and session end).
#pragma once

#include <volt/core/linkage.hpp>
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
VOLT_INLINE std::uint32_t crc32c(std::string_view bytes);

/// TFRecord's masked CRC: rotate right by 15 bits and add a constant.
VOLT_INLINE std::uint32_t masked_crc32c(std::string_view bytes);

VOLT_INLINE void append_little_endian(std::string& out, std::uint64_t value, int bytes);

/// One TFRecord: length (u64 LE), masked CRC of the length bytes, payload, masked CRC of the payload.
VOLT_INLINE std::string tfrecord(std::string_view payload);

/// Protocol-buffer wire format writer (varint, 64-bit, length-delimited and 32-bit fields).
class ProtoWriter {
 public:
  void varint_field(int field, std::uint64_t value);
  void double_field(int field, double value);
  void float_field(int field, float value);
  void bytes_field(int field, std::string_view value);
  const std::string& bytes() const { return bytes_; }

 private:
  void key(int field, int wire_type) { varint((static_cast<std::uint64_t>(field) << 3) | static_cast<std::uint64_t>(wire_type)); }
  void varint(std::uint64_t value);
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
VOLT_INLINE std::string event(double wall_time, std::int64_t step, const ProtoWriter& body_fields);

VOLT_INLINE std::string scalar_value(std::string_view tag, double value);

/// A google.protobuf.Value for a hyperparameter: a number when the whole text parses as a finite number,
/// a bool for "true"/"false"/"True"/"False", else a string (what torch's hparams() does for Python values).
VOLT_INLINE std::string hparam_value(const std::string& text);

/// The hparams plugin's Summary.Value "_hparams_/session_start_info" (metadata only, as torch writes it).
VOLT_INLINE std::string session_start_info_value(const std::map<std::string, std::string>& params, double start_time);

VOLT_INLINE double now_seconds();

VOLT_INLINE std::string host_name();

VOLT_INLINE long process_id();

/// tensorboard's per-process counter of event files (the last part of the file name).
VOLT_INLINE int next_file_uid();


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
VOLT_INLINE std::string plugin_value(std::string_view tag, std::string_view plugin, std::string_view content,
                                     const std::string& payload_fields = {});

/// An hparams plugin value: HParamsPluginData{version 0, `field` = `message`} under `tag`.
VOLT_INLINE std::string hparams_value(std::string_view tag, int field, const std::string& message);

/// "_hparams_/experiment": the names and types of the hyperparameters and the metric tags (what
/// torch.utils.tensorboard.summary.hparams writes), which TensorBoard's HPARAMS tab shows as columns.
VOLT_INLINE std::string experiment_value(const std::map<std::string, std::string>& params,
                                         const std::map<std::string, double>& metrics);

/// "_hparams_/session_end_info" with STATUS_SUCCESS.
VOLT_INLINE std::string session_end_info_value();

/// A Summary.Value holding a PNG image (Summary.Image: height, width, colorspace = channels, the PNG bytes).
VOLT_INLINE std::string image_value(std::string_view tag, std::int64_t height, std::int64_t width, int channels,
                                    const std::string& png);

/// A Summary.Value holding a HistogramProto: min, max, count, sum, sum of squares, then the buckets' right
/// edges and counts as packed doubles.
VOLT_INLINE std::string histogram_value(std::string_view tag, double min, double max, double num, double sum,
                                        double sum_squares, const std::vector<double>& limits,
                                        const std::vector<double>& counts);

/// A Summary.Value of the text plugin: a one-element DT_STRING TensorProto (what torch's add_text writes).
VOLT_INLINE std::string text_value(std::string_view tag, std::string_view text);

}  // namespace detail::tensorboard

}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/loggers/detail/impl/tensorboard_encoding.ipp>
#endif

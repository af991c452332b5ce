/// \file
/// volt::TensorBoardLogger: TensorBoard event files in Lightning's layout.
///
/// The event file is `<save_dir>/<name>/version_<N>/events.out.tfevents.<time>.<host>.<pid>.<n>`, with
/// hparams.yaml beside it.
///
/// The files are TFRecord streams (length, masked CRC32C of the length, payload, masked CRC32C of the payload)
/// of `tensorflow.Event` protocol buffers, encoded here by hand so that volt needs no protobuf library:
/// a file_version event first ("brain.Event:2"), then one event per log_metrics call with a `simple_value`
/// per metric (what torch.utils.tensorboard's add_scalar writes), and for log_hyperparams the hparams
/// plugin's session_start_info summary (what torch.utils.tensorboard.summary.hparams writes).
#pragma once

#include <volt/loggers/logger.hpp>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
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

}  // namespace detail::tensorboard

/// The options of volt::TensorBoardLogger (Lightning's TensorBoardLogger arguments).
struct TensorBoardLoggerOptions {
  /// Parent folder; empty: the Trainer's default_root_dir (or the current directory).
  std::filesystem::path save_dir{};
  /// Experiment folder under save_dir.
  std::string name = "lightning_logs";
  /// Fixed version number; nullopt: the next free version_N.
  std::optional<int> version{};
  /// Lightning's default_hp_metric: log_hyperparams also logs "hp_metric" = -1 at step 0, so that
  /// TensorBoard's hparams tab has a metric column.
  bool default_hp_metric = true;
  /// Prepended to every metric name with "-" (Lightning's prefix).
  std::string prefix{};
};

/// Writes logged metrics as TensorBoard scalars and the hyperparameters for TensorBoard's hparams tab.
/// The event file is created on the first write (with tensorboard's name pattern) and flushed on save()
/// and finalize(). Not thread-safe; the Trainer calls it on global rank zero only.
/// Throws std::runtime_error naming the file when it cannot be created or written.
class TensorBoardLogger : public Logger {
 public:
  /// Keeps the options; creates no file until the first write.
  explicit TensorBoardLogger(TensorBoardLoggerOptions options = {}) : options_(std::move(options)) {}

  /// Sets the folder used when save_dir was left empty. Called before the first write.
  void set_default_save_dir(const std::filesystem::path& dir) { detail::adopt_default_save_dir(options_, dir); }

  std::filesystem::path log_dir() const override { return detail::versioned_log_dir(options_, version_); }

  /// The event file (empty until the first write).
  const std::filesystem::path& event_file() const { return event_file_; }

  /// One event at `step` holding a simple_value per metric (float32, as TensorBoard stores scalars).
  void log_metrics(const std::map<std::string, double>& metrics, std::int64_t step) override {
    if (metrics.empty()) return;
    detail::tensorboard::ProtoWriter summary;
    for (const auto& [key, value] : metrics) {
      const std::string tag = options_.prefix.empty() ? key : options_.prefix + "-" + key;
      summary.bytes_field(detail::tensorboard::summary_value, detail::tensorboard::scalar_value(tag, value));
    }
    write_summary(step, summary);
  }

  /// Writes hparams.yaml, the hparams plugin's session_start_info summary and, with default_hp_metric,
  /// "hp_metric" = -1 at step 0 (Lightning's TensorBoardLogger.log_hyperparams).
  void log_hyperparams(const std::map<std::string, std::string>& params) override {
    std::filesystem::create_directories(log_dir());
    const auto yaml = log_dir() / "hparams.yaml";
    {
      std::ostringstream out;
      for (const auto& [key, value] : params) out << key << ": " << value << '\n';
      if (params.empty()) out << "{}\n";
      detail::write_log_file_atomically(yaml, out.str());
    }
    if (options_.default_hp_metric) log_metrics({{"hp_metric", -1.0}}, 0);
    detail::tensorboard::ProtoWriter summary;
    summary.bytes_field(detail::tensorboard::summary_value,
                        detail::tensorboard::session_start_info_value(params, detail::tensorboard::now_seconds()));
    write_summary(0, summary);
  }

  /// Flushes the event file to the operating system.
  void save() override {
    if (!out_.is_open()) return;
    errno = 0;
    out_.flush();
    if (!out_) throw std::runtime_error(detail::log_write_error(event_file_, errno));
  }

  /// Flushes and closes the event file (the status is not recorded). Throws std::runtime_error when the flush
  /// fails.
  void finalize(const std::string& /*status*/) override {
    save();
    if (!out_.is_open()) return;
    errno = 0;
    out_.close();
    if (!out_) throw std::runtime_error(detail::log_write_error(event_file_, errno));
  }

 private:
  void open() {
    if (out_.is_open()) return;
    const auto dir = log_dir();
    std::error_code error;
    std::filesystem::create_directories(dir, error);
    if (error) throw std::runtime_error("volt: cannot create the TensorBoard log folder " + dir.string() + ": " + error.message());
    const double now = detail::tensorboard::now_seconds();
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%010lld", static_cast<long long>(now));
    event_file_ = dir / ("events.out.tfevents." + std::string(seconds) + "." + detail::tensorboard::host_name() + "." +
                         std::to_string(detail::tensorboard::process_id()) + "." +
                         std::to_string(detail::tensorboard::next_file_uid()));
    out_.open(event_file_, std::ios::binary | std::ios::trunc);
    if (!out_) throw std::runtime_error("volt: cannot create the TensorBoard event file " + event_file_.string());
    detail::tensorboard::ProtoWriter version;
    version.bytes_field(detail::tensorboard::event_file_version, "brain.Event:2");
    write_record(detail::tensorboard::event(now, 0, version));
  }

  void write_summary(std::int64_t step, const detail::tensorboard::ProtoWriter& summary) {
    open();
    detail::tensorboard::ProtoWriter body;
    body.bytes_field(detail::tensorboard::event_summary, summary.bytes());
    write_record(detail::tensorboard::event(detail::tensorboard::now_seconds(), step, body));
  }

  void write_record(const std::string& payload) {
    const std::string record = detail::tensorboard::tfrecord(payload);
    errno = 0;
    out_.write(record.data(), static_cast<std::streamsize>(record.size()));
    if (!out_) throw std::runtime_error(detail::log_write_error(event_file_, errno));
  }

  TensorBoardLoggerOptions options_;
  mutable std::optional<int> version_;
  std::filesystem::path event_file_;
  std::ofstream out_;
};

}  // namespace volt

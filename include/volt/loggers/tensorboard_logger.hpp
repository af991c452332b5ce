/// \file
/// volt::TensorBoardLogger: TensorBoard event files in Lightning's layout.
///
/// The event file is `<save_dir>/<name>/version_<N>/events.out.tfevents.<time>.<host>.<pid>.<n>`, with
/// hparams.yaml beside it.
///
/// The files are TFRecord streams (length, masked CRC32C of the length, payload, masked CRC32C of the payload)
/// of `tensorflow.Event` protocol buffers, encoded by hand (volt/loggers/detail/tensorboard_encoding.hpp) so
/// that volt needs no protobuf library: a file_version event first ("brain.Event:2"), then one event per
/// log_metrics call with a `simple_value` per metric (what torch.utils.tensorboard's add_scalar writes), and
/// what add_image, add_histogram, add_text and the hparams summaries write for log_image / log_images,
/// log_histogram, log_text and log_hyperparams (Lightning users reach these through `logger.experiment`).
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/loggers/detail/tensorboard_encoding.hpp>
#include <volt/loggers/images.hpp>
#include <volt/loggers/logger.hpp>

#include <torch/torch.h>

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

/// Writes logged metrics as TensorBoard scalars, the hyperparameters for TensorBoard's hparams tab, and images,
/// histograms and text logged through its own methods.
/// The event file is created on the first write (with tensorboard's name pattern) and flushed on save()
/// and finalize(). Not thread-safe; the Trainer calls it on global rank zero only.
/// Throws std::runtime_error naming the file when it cannot be created or written.
class TensorBoardLogger : public Logger {
 public:
  /// Keeps the options; creates no file until the first write.
  explicit TensorBoardLogger(TensorBoardLoggerOptions options = {}) : options_(std::move(options)) {}

  /// Sets the folder used when save_dir was left empty. Called before the first write.
  void set_default_save_dir(const std::filesystem::path& dir) override { detail::adopt_default_save_dir(options_, dir); }

  std::filesystem::path log_dir() const override { return detail::versioned_log_dir(options_, version_); }

  /// The event file (empty until the first write).
  const std::filesystem::path& event_file() const { return event_file_; }

  /// One event at `step` holding a simple_value per metric (float32, as TensorBoard stores scalars).
  void log_metrics(const std::map<std::string, double>& metrics, std::int64_t step) override;

  /// Writes hparams.yaml, the hparams plugin's session_start_info summary and, with default_hp_metric,
  /// "hp_metric" = -1 at step 0 with the experiment and session_end_info summaries that make TensorBoard's
  /// HPARAMS tab show it (Lightning's TensorBoardLogger.log_hyperparams).
  void log_hyperparams(const std::map<std::string, std::string>& params) override;

  /// log_hyperparams(params) with `metrics` as the HPARAMS tab's metric columns (Lightning's
  /// log_hyperparams(params, metrics)): the metrics are logged at step 0, and the experiment summary names
  /// them (with the prefix, as log_metrics writes them). Later log_metrics calls with the same names fill the
  /// columns.
  void log_hyperparams(const std::map<std::string, std::string>& params, const std::map<std::string, double>& metrics);

  /// One image at `step` (TensorBoard's IMAGES tab; torch's add_image): (C, H, W) with 1, 3 or 4 channels,
  /// or (H, W); floating point in [0, 1] (scaled by 255, clipped) or uint8. PNG-encoded (volt::encode_png).
  /// Throws std::invalid_argument for another shape or dtype.
  void log_image(const std::string& tag, const torch::Tensor& image, std::int64_t step);

  /// A batch of images (N, C, H, W) as one grid image at `step` (make_image_grid, then log_image; torch's
  /// add_images after torchvision's make_grid).
  void log_images(const std::string& tag, const torch::Tensor& images, std::int64_t step, const ImageGridOptions& grid = {});

  /// A histogram of `values` at `step` (TensorBoard's HISTOGRAMS and DISTRIBUTIONS tabs; torch's
  /// add_histogram): `bins` equal-width buckets between the smallest and largest finite value, with count,
  /// sum and sum of squares. Non-finite values are left out. Throws std::invalid_argument when no finite value
  /// remains or bins < 1.
  void log_histogram(const std::string& tag, const torch::Tensor& values, std::int64_t step, int bins = 64);

  /// Text (Markdown) at `step` under `<tag>/text_summary` (TensorBoard's TEXT tab; torch's add_text).
  void log_text(const std::string& tag, const std::string& text, std::int64_t step);

  /// Flushes the event file to the operating system.
  void save() override;

  /// Flushes and closes the event file (the status is not recorded). Throws std::runtime_error when the flush
  /// fails.
  void finalize(const std::string& /*status*/) override;

 private:
  void open();

  std::string prefixed(const std::string& tag) const { return options_.prefix.empty() ? tag : options_.prefix + "-" + tag; }

  void write_value(std::int64_t step, const std::string& value);

  void write_summary(std::int64_t step, const detail::tensorboard::ProtoWriter& summary);

  void write_record(const std::string& payload);

  TensorBoardLoggerOptions options_;
  mutable std::optional<int> version_;
  std::filesystem::path event_file_;
  std::ofstream out_;
};

}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/loggers/impl/tensorboard_logger.ipp>
#endif

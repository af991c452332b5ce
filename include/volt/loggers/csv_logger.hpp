/// \file
/// volt::CSVLogger: metrics.csv and hparams.yaml in Lightning's layout,
/// `<save_dir>/<name>/version_<N>/{metrics.csv,hparams.yaml}`.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/loggers/logger.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace volt {

/// The options of volt::CSVLogger (Lightning's CSVLogger arguments).
struct CSVLoggerOptions {
  /// Parent folder; empty: the Trainer's default_root_dir (or the current directory).
  std::filesystem::path save_dir{};
  /// Experiment folder under save_dir.
  std::string name = "lightning_logs";
  /// Fixed version number; nullopt: the next free version_N.
  std::optional<int> version{};
  /// Rows kept in memory before they are written (Lightning's flush_logs_every_n_steps).
  std::int64_t flush_logs_every_n_steps = 100;
};

/// Writes every logged metric as a row of metrics.csv: columns "step", "epoch" (when logged) and one per
/// metric name in first-seen order; a row leaves the columns of metrics it lacks empty. A new metric name
/// rewrites the file with the wider header.
class CSVLogger : public Logger {
 public:
  /// Keeps the options; creates no file until the first write.
  explicit CSVLogger(CSVLoggerOptions options = {}) : options_(std::move(options)) {}

  /// Sets the folder used when save_dir was left empty. Called by the Trainer before the first write.
  void set_default_save_dir(const std::filesystem::path& dir) override { detail::adopt_default_save_dir(options_, dir); }

  std::filesystem::path log_dir() const override { return detail::versioned_log_dir(options_, version_); }

  /// Buffers one row at `step`; writes the buffer (save()) once flush_logs_every_n_steps rows are waiting.
  /// Throws std::runtime_error when metrics.csv cannot be written.
  void log_metrics(const std::map<std::string, double>& metrics, std::int64_t step) override;

  /// Writes hparams.yaml (`key: value` per line, `{}` when empty) in log_dir(), creating the folder. Throws
  /// std::runtime_error when the file cannot be written.
  void log_hyperparams(const std::map<std::string, std::string>& params) override;

  /// Writes the rows not yet on disk (the whole file, atomically, when the header grew). Throws
  /// std::runtime_error naming the file and the system error when the write fails (e.g. a full disk); the file
  /// then holds the rows written before, and the rows stay buffered.
  void save() override;

  /// The metric columns seen so far, in first-seen order (without "step").
  const std::vector<std::string>& columns() const { return columns_; }

 private:
  struct Row {
    std::int64_t step = 0;
    std::vector<std::pair<std::size_t, double>> values;
  };

  void ensure_dir() const { std::filesystem::create_directories(log_dir()); }

  CSVLoggerOptions options_;
  mutable std::optional<int> version_;
  std::vector<std::string> columns_;
  std::map<std::string, std::size_t> column_index_;
  std::vector<Row> rows_;
  std::size_t written_rows_ = 0;
  bool header_changed_ = false;
};

}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/loggers/impl/csv_logger.ipp>
#endif

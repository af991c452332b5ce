/// \file
/// volt::CSVLogger: metrics.csv and hparams.yaml in Lightning's layout,
/// `<save_dir>/<name>/version_<N>/{metrics.csv,hparams.yaml}`.
#pragma once

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
  void set_default_save_dir(const std::filesystem::path& dir) { detail::adopt_default_save_dir(options_, dir); }

  std::filesystem::path log_dir() const override { return detail::versioned_log_dir(options_, version_); }

  /// Buffers one row at `step`; writes the buffer (save()) once flush_logs_every_n_steps rows are waiting.
  /// Throws std::runtime_error when metrics.csv cannot be written.
  void log_metrics(const std::map<std::string, double>& metrics, std::int64_t step) override {
    Row row;
    row.step = step;
    for (const auto& [key, value] : metrics) {
      if (column_index_.emplace(key, columns_.size()).second) {
        columns_.push_back(key);
        header_changed_ = true;
      }
      row.values.emplace_back(column_index_.at(key), value);
    }
    rows_.push_back(std::move(row));
    if (static_cast<std::int64_t>(rows_.size() - written_rows_) >= options_.flush_logs_every_n_steps) save();
  }

  /// Writes hparams.yaml (`key: value` per line, `{}` when empty) in log_dir(), creating the folder. Throws
  /// std::runtime_error when the file cannot be written.
  void log_hyperparams(const std::map<std::string, std::string>& params) override {
    ensure_dir();
    std::ostringstream out;
    for (const auto& [key, value] : params) out << key << ": " << value << '\n';
    if (params.empty()) out << "{}\n";
    detail::write_log_file_atomically(log_dir() / "hparams.yaml", out.str());
  }

  /// Writes the rows not yet on disk (the whole file, atomically, when the header grew). Throws
  /// std::runtime_error naming the file and the system error when the write fails (e.g. a full disk); the file
  /// then holds the rows written before, and the rows stay buffered.
  void save() override {
    if (rows_.size() == written_rows_ && !header_changed_) return;
    ensure_dir();
    const auto path = log_dir() / "metrics.csv";
    const bool rewrite = header_changed_ || written_rows_ == 0;
    std::ostringstream out;
    out << std::setprecision(std::numeric_limits<double>::max_digits10);
    if (rewrite) {
      out << "step";
      for (const auto& column : columns_) out << ',' << column;
      out << '\n';
    }
    for (std::size_t i = rewrite ? 0 : written_rows_; i < rows_.size(); ++i) {
      std::vector<std::optional<double>> cells(columns_.size());
      for (const auto& [index, value] : rows_[i].values) cells[index] = value;
      out << rows_[i].step;
      for (const auto& cell : cells) {
        out << ',';
        if (cell) out << *cell;
      }
      out << '\n';
    }
    if (rewrite) {
      detail::write_log_file_atomically(path, out.str());
    } else {
      detail::append_log_file(path, out.str());
    }
    written_rows_ = rows_.size();
    header_changed_ = false;
  }

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

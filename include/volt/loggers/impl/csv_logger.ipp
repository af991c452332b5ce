/// \file
/// Definitions of the functions declared in volt/loggers/csv_logger.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt {

VOLT_INLINE void CSVLogger::log_metrics(const std::map<std::string, double>& metrics, std::int64_t step) {
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

VOLT_INLINE void CSVLogger::log_hyperparams(const std::map<std::string, std::string>& params) {
  ensure_dir();
  std::ostringstream out;
  for (const auto& [key, value] : params) out << key << ": " << value << '\n';
  if (params.empty()) out << "{}\n";
  detail::write_log_file_atomically(log_dir() / "hparams.yaml", out.str());
}

VOLT_INLINE void CSVLogger::save() {
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

}  // namespace volt

/// \file
/// Definitions of the functions declared in volt/loggers/tensorboard_logger.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt {

VOLT_INLINE void TensorBoardLogger::log_metrics(const std::map<std::string, double>& metrics, std::int64_t step) {
  if (metrics.empty()) return;
  detail::tensorboard::ProtoWriter summary;
  for (const auto& [key, value] : metrics) {
    summary.bytes_field(detail::tensorboard::summary_value, detail::tensorboard::scalar_value(prefixed(key), value));
  }
  write_summary(step, summary);
}

VOLT_INLINE void TensorBoardLogger::log_hyperparams(const std::map<std::string, std::string>& params) {
  std::map<std::string, double> metrics;
  if (options_.default_hp_metric) metrics["hp_metric"] = -1.0;
  log_hyperparams(params, metrics);
}

VOLT_INLINE void TensorBoardLogger::log_hyperparams(const std::map<std::string, std::string>& params,
                                                    const std::map<std::string, double>& metrics) {
  namespace tb = detail::tensorboard;
  std::filesystem::create_directories(log_dir());
  const auto yaml = log_dir() / "hparams.yaml";
  {
    std::ostringstream out;
    for (const auto& [key, value] : params) out << key << ": " << value << '\n';
    if (params.empty()) out << "{}\n";
    detail::write_log_file_atomically(yaml, out.str());
  }
  log_metrics(metrics, 0);
  std::map<std::string, double> columns;  // the names log_metrics wrote (with the prefix)
  for (const auto& [key, value] : metrics) columns[prefixed(key)] = value;
  if (!metrics.empty()) write_value(0, tb::experiment_value(params, columns));
  write_value(0, tb::session_start_info_value(params, tb::now_seconds()));
  if (!metrics.empty()) write_value(0, tb::session_end_info_value());
}

VOLT_INLINE void TensorBoardLogger::log_image(const std::string& tag, const torch::Tensor& image, std::int64_t step) {
  const auto hwc = image_to_hwc_uint8(image);
  write_value(step, detail::tensorboard::image_value(prefixed(tag), hwc.size(0), hwc.size(1),
                                                     static_cast<int>(hwc.size(2)), encode_png(hwc.permute({2, 0, 1}))));
}

VOLT_INLINE void TensorBoardLogger::log_histogram(const std::string& tag, const torch::Tensor& values,
                                                  std::int64_t step, int bins) {
  if (bins < 1) throw std::invalid_argument("volt: log_histogram: bins must be >= 1, got " + std::to_string(bins));
  auto flat = values.detach().to(torch::kCPU, torch::kDouble).flatten();
  flat = flat.masked_select(torch::isfinite(flat));
  if (flat.numel() == 0) {
    throw std::invalid_argument("volt: log_histogram: \"" + tag + "\" has no finite value to show");
  }
  const double min = flat.min().item<double>(), max = flat.max().item<double>();
  const auto counts = torch::histc(flat, bins, min, max);
  std::vector<double> limits, buckets;
  for (int i = 0; i < bins; ++i) {
    limits.push_back(i + 1 == bins ? max : min + (max - min) * (i + 1) / bins);
    buckets.push_back(counts[i].item<double>());
  }
  write_value(step, detail::tensorboard::histogram_value(prefixed(tag), min, max, static_cast<double>(flat.numel()),
                                                         flat.sum().item<double>(), flat.square().sum().item<double>(),
                                                         limits, buckets));
}

VOLT_INLINE void TensorBoardLogger::log_text(const std::string& tag, const std::string& text, std::int64_t step) {
  write_value(step, detail::tensorboard::text_value(prefixed(tag) + "/text_summary", text));
}

VOLT_INLINE void TensorBoardLogger::save() {
  if (!out_.is_open()) return;
  errno = 0;
  out_.flush();
  if (!out_) throw std::runtime_error(detail::log_write_error(event_file_, errno));
}

VOLT_INLINE void TensorBoardLogger::finalize(const std::string& /*status*/) {
  save();
  if (!out_.is_open()) return;
  errno = 0;
  out_.close();
  if (!out_) throw std::runtime_error(detail::log_write_error(event_file_, errno));
}

VOLT_INLINE void TensorBoardLogger::open() {
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

VOLT_INLINE void TensorBoardLogger::write_value(std::int64_t step, const std::string& value) {
  detail::tensorboard::ProtoWriter summary;
  summary.bytes_field(detail::tensorboard::summary_value, value);
  write_summary(step, summary);
}

VOLT_INLINE void TensorBoardLogger::write_summary(std::int64_t step, const detail::tensorboard::ProtoWriter& summary) {
  open();
  detail::tensorboard::ProtoWriter body;
  body.bytes_field(detail::tensorboard::event_summary, summary.bytes());
  write_record(detail::tensorboard::event(detail::tensorboard::now_seconds(), step, body));
}

VOLT_INLINE void TensorBoardLogger::write_record(const std::string& payload) {
  const std::string record = detail::tensorboard::tfrecord(payload);
  errno = 0;
  out_.write(record.data(), static_cast<std::streamsize>(record.size()));
  if (!out_) throw std::runtime_error(detail::log_write_error(event_file_, errno));
}

}  // namespace volt

namespace volt {

VOLT_INLINE void TensorBoardLogger::log_images(const std::string& tag, const torch::Tensor& images,
                                               std::int64_t step, const ImageGridOptions& grid) {
  log_image(tag, make_image_grid(images, grid), step);
}

}  // namespace volt

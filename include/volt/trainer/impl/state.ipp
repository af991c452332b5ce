/// \file
/// Definitions of the functions declared in volt/trainer/state.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt {

VOLT_INLINE void TrainerState::log_to_loggers(const std::map<std::string, double>& values) const {
  if (!is_global_zero) return;
  for (Logger* logger : loggers) logger->log_metrics(values, global_step);
}

VOLT_INLINE auto TrainerState::log_dir() const -> std::filesystem::path {
  return loggers.empty() ? (default_root_dir.empty() ? std::filesystem::path(".") : default_root_dir)
                         : loggers.front()->log_dir();
}

}  // namespace volt

namespace volt {

VOLT_INLINE void TrainerState::log(std::string_view name, double value, const LogOptions& options) {
  metrics_->log(name, value, options, phase_);
}

VOLT_INLINE void TrainerState::log(std::string_view name, const torch::Tensor& value, const LogOptions& options) {
  metrics_->log(name, value, options, phase_);
}

}  // namespace volt

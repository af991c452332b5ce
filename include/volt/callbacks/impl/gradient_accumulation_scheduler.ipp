/// \file
/// Definitions of the functions declared in volt/callbacks/gradient_accumulation_scheduler.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt {

VOLT_INLINE GradientAccumulationScheduler::GradientAccumulationScheduler(std::map<std::int64_t, std::int64_t> scheduling)
    : scheduling_(std::move(scheduling)) {
  check();
}

VOLT_INLINE bool GradientAccumulationScheduler::going_to_accumulate_grad_batches() const {
  for (const auto& [epoch, factor] : scheduling_) {
    if (factor > 1) return true;
  }
  return false;
}

VOLT_INLINE std::int64_t GradientAccumulationScheduler::get_accumulate_grad_batches(std::int64_t epoch) const {
  auto it = scheduling_.upper_bound(epoch);
  return it == scheduling_.begin() ? 1 : std::prev(it)->second;
}

VOLT_INLINE void GradientAccumulationScheduler::check() {
  if (scheduling_.empty()) throw std::invalid_argument("Empty dict cannot be interpreted correct");
  std::string keys;
  std::string values;
  bool bad_key = false;
  bool bad_value = false;
  for (const auto& [epoch, factor] : scheduling_) {
    keys += (keys.empty() ? "" : ", ") + std::to_string(epoch);
    values += (values.empty() ? "" : ", ") + std::to_string(factor);
    bad_key = bad_key || epoch < 0;
    bad_value = bad_value || factor < 1;
  }
  if (bad_key) throw MisconfigurationError("Epoch should be an int greater than or equal to 0. Got [" + keys + "].");
  if (bad_value) {
    throw MisconfigurationError("Accumulation factor should be an int greater than 0. Got [" + values + "].");
  }
  scheduling_.emplace(0, 1);  // no effect when epoch 0 has an entry
}

}  // namespace volt

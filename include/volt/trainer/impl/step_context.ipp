/// \file
/// Definitions of the functions declared in volt/trainer/step_context.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt {

VOLT_INLINE auto StepContext::optimizer(std::size_t index) const -> ManualOptimizer& {
  auto& all = optimizers();
  if (index >= all.size()) {
    throw std::out_of_range("volt: ctx.optimizer(" + std::to_string(index) + "): the model configured " +
                            std::to_string(all.size()) + " optimizer(s)");
  }
  return all[index];
}

VOLT_INLINE void StepContext::clip_gradients(ManualOptimizer& optimizer, double value, GradClipAlgorithm algorithm) const {
  driver("clip_gradients").clip_gradients(optimizer.optimizer(), value, algorithm);
}

VOLT_INLINE auto StepContext::driver(const char* what) const -> detail::ManualDriver& {
  if (!manual_driver_) {
    throw MisconfigurationError(std::string("volt: ctx.") + what +
                                "() is for manual optimization: declare `static constexpr bool "
                                "automatic_optimization = false;` in the model (the Trainer steps the optimizers "
                                "under automatic optimization; read them from ctx.trainer().optimizers)");
  }
  return *manual_driver_;
}

}  // namespace volt

namespace volt {

VOLT_INLINE void StepContext::log(std::string_view name, const torch::Tensor& value, const LogOptions& options) {
  state_->metrics_->log(name, value, options, state_->phase_);
}

VOLT_INLINE void StepContext::log(std::string_view name, double value, const LogOptions& options) {
  state_->metrics_->log(name, value, options, state_->phase_);
}

}  // namespace volt

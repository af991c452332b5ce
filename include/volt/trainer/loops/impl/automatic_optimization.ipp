/// \file
/// Definitions of the functions declared in volt/trainer/loops/automatic_optimization.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE void clip_gradients(torch::optim::Optimizer& optimizer, double value, GradClipAlgorithm algorithm) {
  if (value <= 0.0) return;
  std::vector<torch::Tensor> gradients;
  for (const auto& group : optimizer.param_groups()) {
    for (const auto& parameter : group.params()) gradients.push_back(parameter.grad());
  }
  if (algorithm == GradClipAlgorithm::norm) {
    (void)optim::clip_grad_norm_(gradients, value);
  } else {
    optim::clip_grad_value_(gradients, value);
  }
}

VOLT_INLINE void clip_gradients(const TrainerOptions& options, torch::optim::Optimizer& optimizer) {
  if (options.gradient_clip_val) clip_gradients(optimizer, *options.gradient_clip_val, options.gradient_clip_algorithm);
}

VOLT_INLINE void check_finite_loss(const TrainerOptions& options, const TrainerState& state, const torch::Tensor& loss,
                                   std::int64_t batch_idx) {
  if (!options.error_on_nonfinite_loss || torch::isfinite(loss.detach()).all().item<bool>()) return;
  const double value = loss.detach().sum().item<double>();
  throw std::runtime_error("volt: the training loss is " + (std::isnan(value) ? std::string("NaN") : python_float(value)) +
                           " at global step " + std::to_string(state.global_step) + " (epoch " +
                           std::to_string(state.current_epoch) + ", batch " + std::to_string(batch_idx) +
                           "); stopping because error_on_nonfinite_loss is set.");
}

}  // namespace volt::detail

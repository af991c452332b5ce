/// \file
/// Definitions of the functions declared in volt/precision/detail/grad_scaler_ops.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE std::vector<GradientGroup> gradients_by_device_and_dtype(torch::optim::Optimizer& optimizer) {
  std::vector<GradientGroup> groups;
  for (auto& param_group : optimizer.param_groups()) {
    for (auto& parameter : param_group.params()) {
      const auto& gradient = parameter.grad();
      if (!gradient.defined()) continue;
      if (gradient.scalar_type() == torch::kHalf) throw std::invalid_argument("Attempting to unscale FP16 gradients.");
      auto to_unscale = gradient.is_sparse() ? gradient._values() : gradient;
      auto group = std::find_if(groups.begin(), groups.end(), [&](const GradientGroup& candidate) {
        return candidate.device == to_unscale.device() && candidate.dtype == to_unscale.scalar_type();
      });
      if (group == groups.end()) {
        groups.push_back(GradientGroup{to_unscale.device(), to_unscale.scalar_type(), {}});
        group = std::prev(groups.end());
      }
      group->gradients.push_back(std::move(to_unscale));
    }
  }
  return groups;
}

VOLT_INLINE torch::Tensor replica_on(PerDeviceTensors& replicas, const torch::Tensor& tensor, torch::Device device) {
  for (const auto& [replica_device, replica] : replicas) {
    if (replica_device == device) return replica;
  }
  replicas.emplace_back(device, tensor.to(device, /*non_blocking=*/true));
  return replicas.back().second;
}

VOLT_INLINE void unscale_with_tensor_ops(std::vector<torch::Tensor>& gradients, torch::Tensor& found_inf,
                                         const torch::Tensor& inv_scale) {
  for (auto& gradient : gradients) {
    found_inf.masked_fill_(gradient.isfinite().logical_not().any(), 1.0);
    if (gradient.scalar_type() == torch::kBFloat16 || gradient.scalar_type() == torch::kHalf) {
      gradient.copy_(gradient.to(torch::kFloat).mul_(inv_scale));
    } else {
      gradient.mul_(inv_scale);
    }
  }
}

VOLT_INLINE void update_scale_with_tensor_ops(torch::Tensor& scale, torch::Tensor& growth_tracker,
                                              const torch::Tensor& found_inf, double growth_factor, double backoff_factor,
                                              std::int64_t growth_interval) {
  const auto overflowed = found_inf.ne(0);
  const auto successful = growth_tracker + 1;
  const auto interval_completed = successful.eq(growth_interval);
  // The kernel multiplies in double and rounds once to float.
  const auto scale_in_double = scale.to(torch::kDouble);
  const auto backed_off = (scale_in_double * backoff_factor).to(torch::kFloat);
  const auto grown = (scale_in_double * growth_factor).to(torch::kFloat);
  const auto grow = interval_completed.logical_and(grown.isfinite());
  scale.copy_(torch::where(overflowed, backed_off, torch::where(grow, grown, scale)));
  growth_tracker.copy_(successful.masked_fill(overflowed.logical_or(interval_completed), 0));
}

}  // namespace volt::detail

/// \file
/// The device work of volt::GradScaler (volt/precision/grad_scaler.hpp) apart from LibTorch's fused kernels:
/// gradients grouped for one kernel call each, one copy of a tensor per device, and what the two AMP kernels
/// (`_amp_foreach_non_finite_check_and_unscale_`, `_amp_update_scale_`) compute, as tensor ops for the backends
/// without them. Implementation, no public API.
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <stdexcept>
#include <utility>
#include <vector>

namespace volt::detail {

/// One tensor per device (a found-inf flag, an inverse scale), in the order the devices were first seen.
using PerDeviceTensors = std::vector<std::pair<torch::Device, torch::Tensor>>;

/// Gradients that one fused kernel call can take: same device, same dtype.
struct GradientGroup {
  torch::Device device;
  c10::ScalarType dtype;
  std::vector<torch::Tensor> gradients;
};

/// The defined gradients of `optimizer`'s parameters, grouped by device and dtype in the order met; a sparse
/// gradient is taken through its values (its indices carry no magnitude). Throws std::invalid_argument for an
/// fp16 gradient (PyTorch's "Attempting to unscale FP16 gradients.").
inline std::vector<GradientGroup> gradients_by_device_and_dtype(torch::optim::Optimizer& optimizer) {
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

/// `tensor` on `device`, copied once per device and then reused (PyTorch's _MultiDeviceReplicator).
inline torch::Tensor replica_on(PerDeviceTensors& replicas, const torch::Tensor& tensor, torch::Device device) {
  for (const auto& [replica_device, replica] : replicas) {
    if (replica_device == device) return replica;
  }
  replicas.emplace_back(device, tensor.to(device, /*non_blocking=*/true));
  return replicas.back().second;
}

/// What `_amp_foreach_non_finite_check_and_unscale_` computes, for backends without it: set `found_inf`
/// to 1 if any value is inf/NaN, and multiply every gradient by `inv_scale` in at least fp32 (the
/// kernel's math type) without leaving the device.
inline void unscale_with_tensor_ops(std::vector<torch::Tensor>& gradients, torch::Tensor& found_inf,
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

/// What `_amp_update_scale_` computes, for backends without it, as device tensor ops (no host sync): `scale`
/// (0-dim float32) times `backoff_factor` where `found_inf` is nonzero, else times `growth_factor` when
/// `growth_tracker` (0-dim int32) completes `growth_interval` finite steps and the grown scale is finite;
/// `growth_tracker` counts the finite steps and restarts at 0 after a growth or a backoff. Both in place.
inline void update_scale_with_tensor_ops(torch::Tensor& scale, torch::Tensor& growth_tracker,
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

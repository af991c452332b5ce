/// \file
/// The device work of volt::GradScaler (volt/precision/grad_scaler.hpp) apart from LibTorch's fused kernels:
/// gradients grouped for one kernel call each, one copy of a tensor per device, and what the two AMP kernels
/// (`_amp_foreach_non_finite_check_and_unscale_`, `_amp_update_scale_`) compute, as tensor ops for the backends
/// without them. Implementation, no public API.
#pragma once

#include <volt/core/linkage.hpp>
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
VOLT_INLINE std::vector<GradientGroup> gradients_by_device_and_dtype(torch::optim::Optimizer& optimizer);

/// `tensor` on `device`, copied once per device and then reused (PyTorch's _MultiDeviceReplicator).
VOLT_INLINE torch::Tensor replica_on(PerDeviceTensors& replicas, const torch::Tensor& tensor, torch::Device device);

/// What `_amp_foreach_non_finite_check_and_unscale_` computes, for backends without it: set `found_inf`
/// to 1 if any value is inf/NaN, and multiply every gradient by `inv_scale` in at least fp32 (the
/// kernel's math type) without leaving the device.
VOLT_INLINE void unscale_with_tensor_ops(std::vector<torch::Tensor>& gradients, torch::Tensor& found_inf,
                                         const torch::Tensor& inv_scale);

/// What `_amp_update_scale_` computes, for backends without it, as device tensor ops (no host sync): `scale`
/// (0-dim float32) times `backoff_factor` where `found_inf` is nonzero, else times `growth_factor` when
/// `growth_tracker` (0-dim int32) completes `growth_interval` finite steps and the grown scale is finite;
/// `growth_tracker` counts the finite steps and restarts at 0 after a growth or a backoff. Both in place.
VOLT_INLINE void update_scale_with_tensor_ops(torch::Tensor& scale, torch::Tensor& growth_tracker,
                                              const torch::Tensor& found_inf, double growth_factor, double backoff_factor,
                                              std::int64_t growth_interval);

}  // namespace volt::detail

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/precision/detail/impl/grad_scaler_ops.ipp>
#endif

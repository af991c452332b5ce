/// \file
/// The differences between LibTorch versions in kernels and optimizer internals: which device types have the
/// grad scaler's and the fused optimizers' kernels, the optimizer state's key type, multi-tensor ops and the
/// optimizer steps with a tensor learning rate. The second part of volt/core/compat.hpp, which includes it at
/// its end; include either.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/compat.hpp>

#include <torch/torch.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <cstddef>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace volt::compat {

// ---------------------------------------------------------------------------------------------------
// Grad scaler kernels (volt/precision/grad_scaler.hpp).
//
// `at::_amp_foreach_non_finite_check_and_unscale_` and `at::_amp_update_scale_` are declared in every
// version, but a call throws where no kernel is registered for the tensors' backend: CUDA always has
// them; CPU got them in LibTorch 2.3 (absent in 1.13, present in 2.11); MPS only in macOS builds of recent
// versions. Asking the dispatcher answers for the LibTorch actually loaded, whatever its version.

/// Whether the loaded LibTorch's dispatcher has a kernel of operator `name` (overload `overload`, "" for the
/// default one) for `device_type` (CPU, CUDA or MPS; false for any other).
VOLT_INLINE bool has_kernel(const char* name, const char* overload, c10::DeviceType device_type);

/// Whether both fused grad-scaler kernels are registered for `device_type` in the loaded LibTorch.
VOLT_INLINE bool amp_scaler_kernels_available(c10::DeviceType device_type);

// ---------------------------------------------------------------------------------------------------
// Optimizer internals (volt/optim/).
//
// Optimizer::state() is keyed by the parameter's TensorImpl: LibTorch 1.13 by its address printed as a
// string (c10::guts::to_string), 2.x by the address itself. `at::_fused_adam_` and `at::_fused_adamw_`
// (one kernel for a whole list of parameters) are called from LibTorch 2.1 on (1.13 has only a CUDA
// `_fused_adam_`, and no `_fused_adamw_`); which device types have kernels is asked of the dispatcher
// (CUDA in 2.x, CPU from 2.4).

/// The key type of torch::optim::Optimizer::state() in this LibTorch.
using OptimizerStateKey =
    std::remove_cvref_t<decltype(std::declval<torch::optim::Optimizer&>().state())>::key_type;

/// The key under which LibTorch's optimizers keep the state of `parameter` (a template only so that the
/// branch of the other versions is discarded).
template <class Key = OptimizerStateKey>
Key optimizer_state_key(const at::Tensor& parameter) {
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream text;  // what LibTorch 1.13's c10::guts::to_string(TensorImpl*) writes
    text << static_cast<const void*>(parameter.unsafeGetTensorImpl());
    return text.str();
  } else {
    return static_cast<Key>(parameter.unsafeGetTensorImpl());
  }
}

/// Whether volt calls LibTorch's fused Adam/AdamW kernels in this LibTorch version at all.
inline constexpr bool has_fused_adam = VOLT_TORCH_VERSION >= 20100;

/// Whether the loaded LibTorch has a fused Adam (`decoupled_weight_decay` false) or AdamW kernel for
/// `device_type`.
VOLT_INLINE bool fused_adam_available(c10::DeviceType device_type, bool decoupled_weight_decay);

/// `at::_fused_adamw_` when `decoupled_weight_decay`, else `at::_fused_adam_`, with `maximize` false and
/// no grad scale or found-inf tensor. `state_steps` are float32 tensors on the parameters' device holding
/// the step number each update is the n-th of (already counted). Throws c10::Error where absent.
VOLT_INLINE void fused_adam_(bool decoupled_weight_decay, at::TensorList params, at::TensorList grads,
                             at::TensorList exp_avgs, at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs,
                             at::TensorList state_steps, double lr, double beta1, double beta2, double weight_decay,
                             double eps, bool amsgrad);

// ---------------------------------------------------------------------------------------------------
// Multi-tensor copies.

/// `destinations[i].copy_(sources[i])` for every i (same dtypes and sizes): one multi-tensor kernel per
/// device where LibTorch has `at::_foreach_copy_` (2.4 on), else one copy per tensor.
VOLT_INLINE void foreach_copy_(at::TensorList destinations, at::TensorList sources);

/// `tensors[i].lerp_(ends[i], weight)` for every i (floating tensors of the same dtypes and sizes, as
/// torch.optim.swa_utils averages with): one multi-tensor kernel per device where LibTorch has
/// `at::_foreach_lerp_` (2.0 on), else one lerp per tensor; the values are the same (one formula).
VOLT_INLINE void foreach_lerp_(at::TensorList tensors, at::TensorList ends, double weight);

// ---------------------------------------------------------------------------------------------------
// Multi-tensor gradient clipping and optimizer steps with a tensor learning rate (volt/optim/capturable.hpp).
//
// `at::_foreach_norm`, `at::_foreach_mul_(TensorList, Tensor)` and `at::_foreach_clamp_min_/max_` are used from
// LibTorch 2.4 on (one kernel per device); before, one op per tensor. The fused Adam, AdamW and SGD kernels
// with a tensor learning rate (the `tensor_lr` overloads, which read the learning rate and the step counts on
// the device and so can be captured in a CUDA graph) exist from LibTorch 2.4 on; where they do not, the
// wrappers below throw c10::Error.

/// True where LibTorch has the fused Adam, AdamW and SGD kernels with a tensor learning rate (2.4 and later).
inline constexpr bool has_tensor_lr_fused_optimizers = VOLT_TORCH_VERSION >= 20400;

/// The 2-norm of each tensor of `tensors` (one multi-tensor kernel per device from LibTorch 2.4, else one
/// norm per tensor), each a 0-dim tensor of the tensor's dtype.
VOLT_INLINE std::vector<at::Tensor> foreach_norm(at::TensorList tensors);

/// Multiplies every tensor of `tensors` in place by the 0-dim tensor `factor` (one multi-tensor kernel per
/// device from LibTorch 2.4, else one multiplication per tensor, with `factor` cast to the tensor's dtype).
VOLT_INLINE void foreach_mul_(at::TensorList tensors, const at::Tensor& factor);

/// Clamps every element of `tensors` in place to [low, high] (two multi-tensor ops per device from LibTorch
/// 2.4, else one clamp_ per tensor).
VOLT_INLINE void foreach_clamp_(at::TensorList tensors, double low, double high);

/// `at::_fused_adamw_` when `decoupled_weight_decay`, else `at::_fused_adam_`, in their overloads with a
/// tensor learning rate `lr` (a 0-dim float32 tensor on the parameters' device), `maximize` false, no grad
/// scale, and `found_inf` (where nonzero, the kernel changes nothing). `state_steps` are float32 tensors on
/// the device, already counted. Throws c10::Error where has_tensor_lr_fused_optimizers is false.
VOLT_INLINE void fused_adam_tensor_lr_(bool decoupled_weight_decay, at::TensorList params, at::TensorList grads,
                                       at::TensorList exp_avgs, at::TensorList exp_avg_sqs,
                                       at::TensorList max_exp_avg_sqs, at::TensorList state_steps, const at::Tensor& lr,
                                       double beta1, double beta2, double weight_decay, double eps, bool amsgrad,
                                       const std::optional<at::Tensor>& found_inf);

/// `at::_fused_sgd_` in its overload with a tensor learning rate `lr` (a 0-dim float32 tensor on the
/// parameters' device), `maximize` and `is_first_step` false, no grad scale, and `found_inf` (where nonzero,
/// the kernel changes nothing). `momentum_buffers` is empty without momentum. Throws c10::Error where
/// has_tensor_lr_fused_optimizers is false.
VOLT_INLINE void fused_sgd_tensor_lr_(at::TensorList params, at::TensorList grads, at::TensorList momentum_buffers,
                                      double weight_decay, double momentum, const at::Tensor& lr, double dampening,
                                      bool nesterov, const std::optional<at::Tensor>& found_inf);

}  // namespace volt::compat

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/core/impl/compat_kernels.ipp>
#endif

/// \file
/// The differences between LibTorch versions in kernels and optimizer internals: which device types have the
/// grad scaler's and the fused optimizers' kernels, the optimizer state's key type, multi-tensor ops and the
/// optimizer steps with a tensor learning rate. The second part of volt/core/compat.hpp, which includes it at
/// its end; include either.
#pragma once

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
inline bool has_kernel(const char* name, const char* overload, c10::DeviceType device_type) {
  c10::DispatchKey key{};
  switch (device_type) {
    case c10::DeviceType::CPU: key = c10::DispatchKey::CPU; break;
    case c10::DeviceType::CUDA: key = c10::DispatchKey::CUDA; break;
    case c10::DeviceType::MPS: key = c10::DispatchKey::MPS; break;
    default: return false;
  }
  const auto handle = c10::Dispatcher::singleton().findSchema({name, overload});
  return handle && handle->hasKernelForDispatchKey(key);
}

/// Whether both fused grad-scaler kernels are registered for `device_type` in the loaded LibTorch.
inline bool amp_scaler_kernels_available(c10::DeviceType device_type) {
  return has_kernel("aten::_amp_foreach_non_finite_check_and_unscale_", "", device_type) &&
         has_kernel("aten::_amp_update_scale_", "", device_type);
}

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
inline bool fused_adam_available(c10::DeviceType device_type, bool decoupled_weight_decay) {
  if constexpr (!has_fused_adam) {
    return false;
  } else {
    if (device_type != c10::DeviceType::CPU && device_type != c10::DeviceType::CUDA) return false;
    return has_kernel(decoupled_weight_decay ? "aten::_fused_adamw_" : "aten::_fused_adam_", "", device_type);
  }
}

/// `at::_fused_adamw_` when `decoupled_weight_decay`, else `at::_fused_adam_`, with `maximize` false and
/// no grad scale or found-inf tensor. `state_steps` are float32 tensors on the parameters' device holding
/// the step number each update is the n-th of (already counted). Throws c10::Error where absent.
inline void fused_adam_(bool decoupled_weight_decay, at::TensorList params, at::TensorList grads,
                        at::TensorList exp_avgs, at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs,
                        at::TensorList state_steps, double lr, double beta1, double beta2, double weight_decay,
                        double eps, bool amsgrad) {
#if VOLT_TORCH_VERSION >= 20100
  if (decoupled_weight_decay) {
    at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, beta1, beta2,
                      weight_decay, eps, amsgrad, /*maximize=*/false);
  } else {
    at::_fused_adam_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, beta1, beta2,
                     weight_decay, eps, amsgrad, /*maximize=*/false);
  }
#else
  (void)decoupled_weight_decay, (void)params, (void)grads, (void)exp_avgs, (void)exp_avg_sqs,
      (void)max_exp_avg_sqs, (void)state_steps, (void)lr, (void)beta1, (void)beta2, (void)weight_decay,
      (void)eps, (void)amsgrad;
  TORCH_CHECK(false, "volt: fused Adam kernels are not used with this LibTorch (", torch_version_string,
              "); use the multi-tensor implementation");
#endif
}

// ---------------------------------------------------------------------------------------------------
// Multi-tensor copies.

/// `destinations[i].copy_(sources[i])` for every i (same dtypes and sizes): one multi-tensor kernel per
/// device where LibTorch has `at::_foreach_copy_` (2.4 on), else one copy per tensor.
inline void foreach_copy_(at::TensorList destinations, at::TensorList sources) {
  TORCH_CHECK(destinations.size() == sources.size(), "volt: foreach_copy_ got ", destinations.size(),
              " destinations and ", sources.size(), " sources");
  if (destinations.empty()) return;
#if VOLT_TORCH_VERSION >= 20400
  at::_foreach_copy_(destinations, sources);
#else
  for (std::size_t i = 0; i < destinations.size(); ++i) destinations[i].copy_(sources[i]);
#endif
}

/// `tensors[i].lerp_(ends[i], weight)` for every i (floating tensors of the same dtypes and sizes, as
/// torch.optim.swa_utils averages with): one multi-tensor kernel per device where LibTorch has
/// `at::_foreach_lerp_` (2.0 on), else one lerp per tensor; the values are the same (one formula).
inline void foreach_lerp_(at::TensorList tensors, at::TensorList ends, double weight) {
  TORCH_CHECK(tensors.size() == ends.size(), "volt: foreach_lerp_ got ", tensors.size(), " tensors and ", ends.size(),
              " ends");
  if (tensors.empty()) return;
#if VOLT_TORCH_VERSION >= 20000
  at::_foreach_lerp_(tensors, ends, at::Scalar(weight));
#else
  for (std::size_t i = 0; i < tensors.size(); ++i) tensors[i].lerp_(ends[i], weight);
#endif
}

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
inline std::vector<at::Tensor> foreach_norm(at::TensorList tensors) {
#if VOLT_TORCH_VERSION >= 20400
  return at::_foreach_norm(tensors, 2);
#else
  std::vector<at::Tensor> norms;
  norms.reserve(tensors.size());
  for (const auto& tensor : tensors) norms.push_back(tensor.norm(2));
  return norms;
#endif
}

/// Multiplies every tensor of `tensors` in place by the 0-dim tensor `factor` (one multi-tensor kernel per
/// device from LibTorch 2.4, else one multiplication per tensor, with `factor` cast to the tensor's dtype).
inline void foreach_mul_(at::TensorList tensors, const at::Tensor& factor) {
#if VOLT_TORCH_VERSION >= 20400
  at::_foreach_mul_(tensors, factor);
#else
  for (auto tensor : tensors) tensor.mul_(factor.to(tensor.scalar_type()));
#endif
}

/// Clamps every element of `tensors` in place to [low, high] (two multi-tensor ops per device from LibTorch
/// 2.4, else one clamp_ per tensor).
inline void foreach_clamp_(at::TensorList tensors, double low, double high) {
#if VOLT_TORCH_VERSION >= 20400
  at::_foreach_clamp_min_(tensors, at::Scalar(low));
  at::_foreach_clamp_max_(tensors, at::Scalar(high));
#else
  for (auto tensor : tensors) tensor.clamp_(low, high);
#endif
}

/// `at::_fused_adamw_` when `decoupled_weight_decay`, else `at::_fused_adam_`, in their overloads with a
/// tensor learning rate `lr` (a 0-dim float32 tensor on the parameters' device), `maximize` false, no grad
/// scale, and `found_inf` (where nonzero, the kernel changes nothing). `state_steps` are float32 tensors on
/// the device, already counted. Throws c10::Error where has_tensor_lr_fused_optimizers is false.
inline void fused_adam_tensor_lr_(bool decoupled_weight_decay, at::TensorList params, at::TensorList grads,
                                  at::TensorList exp_avgs, at::TensorList exp_avg_sqs,
                                  at::TensorList max_exp_avg_sqs, at::TensorList state_steps, const at::Tensor& lr,
                                  double beta1, double beta2, double weight_decay, double eps, bool amsgrad,
                                  const std::optional<at::Tensor>& found_inf) {
#if VOLT_TORCH_VERSION >= 20400
  if (decoupled_weight_decay) {
    at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, beta1, beta2,
                      weight_decay, eps, amsgrad, /*maximize=*/false, /*grad_scale=*/std::nullopt, found_inf);
  } else {
    at::_fused_adam_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, beta1, beta2,
                     weight_decay, eps, amsgrad, /*maximize=*/false, /*grad_scale=*/std::nullopt, found_inf);
  }
#else
  (void)decoupled_weight_decay, (void)params, (void)grads, (void)exp_avgs, (void)exp_avg_sqs,
      (void)max_exp_avg_sqs, (void)state_steps, (void)lr, (void)beta1, (void)beta2, (void)weight_decay,
      (void)eps, (void)amsgrad, (void)found_inf;
  TORCH_CHECK(false, "volt: fused optimizer kernels with a tensor learning rate need LibTorch 2.4 or later (this is ",
              torch_version_string, ")");
#endif
}

/// `at::_fused_sgd_` in its overload with a tensor learning rate `lr` (a 0-dim float32 tensor on the
/// parameters' device), `maximize` and `is_first_step` false, no grad scale, and `found_inf` (where nonzero,
/// the kernel changes nothing). `momentum_buffers` is empty without momentum. Throws c10::Error where
/// has_tensor_lr_fused_optimizers is false.
inline void fused_sgd_tensor_lr_(at::TensorList params, at::TensorList grads, at::TensorList momentum_buffers,
                                 double weight_decay, double momentum, const at::Tensor& lr, double dampening,
                                 bool nesterov, const std::optional<at::Tensor>& found_inf) {
#if VOLT_TORCH_VERSION >= 20400
  at::_fused_sgd_(params, grads, momentum_buffers, weight_decay, momentum, lr, dampening, nesterov,
                  /*maximize=*/false, /*is_first_step=*/false, /*grad_scale=*/std::nullopt, found_inf);
#else
  (void)params, (void)grads, (void)momentum_buffers, (void)weight_decay, (void)momentum, (void)lr,
      (void)dampening, (void)nesterov, (void)found_inf;
  TORCH_CHECK(false, "volt: fused optimizer kernels with a tensor learning rate need LibTorch 2.4 or later (this is ",
              torch_version_string, ")");
#endif
}

}  // namespace volt::compat

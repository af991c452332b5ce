/// \file
/// Definitions of the functions declared in volt/core/compat_kernels.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::compat {

VOLT_INLINE bool has_kernel(const char* name, const char* overload, c10::DeviceType device_type) {
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

VOLT_INLINE bool amp_scaler_kernels_available(c10::DeviceType device_type) {
  return has_kernel("aten::_amp_foreach_non_finite_check_and_unscale_", "", device_type) &&
         has_kernel("aten::_amp_update_scale_", "", device_type);
}

VOLT_INLINE bool fused_adam_available(c10::DeviceType device_type, bool decoupled_weight_decay) {
  if constexpr (!has_fused_adam) {
    return false;
  } else {
    if (device_type != c10::DeviceType::CPU && device_type != c10::DeviceType::CUDA) return false;
    return has_kernel(decoupled_weight_decay ? "aten::_fused_adamw_" : "aten::_fused_adam_", "", device_type);
  }
}

VOLT_INLINE void fused_adam_(bool decoupled_weight_decay, at::TensorList params, at::TensorList grads,
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

VOLT_INLINE void foreach_copy_(at::TensorList destinations, at::TensorList sources) {
  TORCH_CHECK(destinations.size() == sources.size(), "volt: foreach_copy_ got ", destinations.size(),
              " destinations and ", sources.size(), " sources");
  if (destinations.empty()) return;
#if VOLT_TORCH_VERSION >= 20400
  at::_foreach_copy_(destinations, sources);
#else
  for (std::size_t i = 0; i < destinations.size(); ++i) destinations[i].copy_(sources[i]);
#endif
}

VOLT_INLINE std::vector<at::Tensor> foreach_norm(at::TensorList tensors) {
#if VOLT_TORCH_VERSION >= 20400
  return at::_foreach_norm(tensors, 2);
#else
  std::vector<at::Tensor> norms;
  norms.reserve(tensors.size());
  for (const auto& tensor : tensors) norms.push_back(tensor.norm(2));
  return norms;
#endif
}

VOLT_INLINE void foreach_mul_(at::TensorList tensors, const at::Tensor& factor) {
#if VOLT_TORCH_VERSION >= 20400
  at::_foreach_mul_(tensors, factor);
#else
  for (auto tensor : tensors) tensor.mul_(factor.to(tensor.scalar_type()));
#endif
}

VOLT_INLINE void foreach_clamp_(at::TensorList tensors, double low, double high) {
#if VOLT_TORCH_VERSION >= 20400
  at::_foreach_clamp_min_(tensors, at::Scalar(low));
  at::_foreach_clamp_max_(tensors, at::Scalar(high));
#else
  for (auto tensor : tensors) tensor.clamp_(low, high);
#endif
}

VOLT_INLINE void fused_adam_tensor_lr_(bool decoupled_weight_decay, at::TensorList params, at::TensorList grads,
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

VOLT_INLINE void fused_sgd_tensor_lr_(at::TensorList params, at::TensorList grads, at::TensorList momentum_buffers,
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

namespace volt::compat {

VOLT_INLINE void foreach_lerp_(at::TensorList tensors, at::TensorList ends, double weight) {
  TORCH_CHECK(tensors.size() == ends.size(), "volt: foreach_lerp_ got ", tensors.size(), " tensors and ", ends.size(),
              " ends");
  if (tensors.empty()) return;
#if VOLT_TORCH_VERSION >= 20000
  at::_foreach_lerp_(tensors, ends, at::Scalar(weight));
#else
  for (std::size_t i = 0; i < tensors.size(); ++i) tensors[i].lerp_(ends[i], weight);
#endif
}

}  // namespace volt::compat

/// \file
/// Definitions of the functions declared in volt/optim/adam.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::optim::detail {

VOLT_INLINE bool automatic_prefers_fused_adam(c10::DeviceType device_type) {
  return device_type == c10::DeviceType::CUDA || device_type == c10::DeviceType::CPU;
}

VOLT_INLINE void adam_multi_tensor_group(bool decoupled_weight_decay, const std::vector<at::Tensor>& params,
                                         const std::vector<at::Tensor>& grads, std::vector<at::Tensor>& exp_avgs,
                                         std::vector<at::Tensor>& exp_avg_sqs, std::vector<at::Tensor>& max_exp_avg_sqs,
                                         const std::vector<double>& bias_correction2_roots,
                                         const std::vector<double>& negative_step_sizes, double lr, double beta1,
                                         double beta2, double eps, double weight_decay, bool amsgrad) {
  std::vector<at::Tensor> decayed_grads;
  if (weight_decay != 0) {
    if (decoupled_weight_decay) {
      at::_foreach_mul_(params, at::Scalar(1 - lr * weight_decay));
    } else {
      decayed_grads = at::_foreach_add(grads, params, at::Scalar(weight_decay));
    }
  }
  const auto& used_grads = decayed_grads.empty() ? grads : decayed_grads;

  at::_foreach_mul_(exp_avgs, at::Scalar(beta1));
  at::_foreach_add_(exp_avgs, used_grads, at::Scalar(1 - beta1));
  at::_foreach_mul_(exp_avg_sqs, at::Scalar(beta2));
  at::_foreach_addcmul_(exp_avg_sqs, used_grads, used_grads, at::Scalar(1 - beta2));
  if (amsgrad) at::_foreach_maximum_(max_exp_avg_sqs, exp_avg_sqs);

  auto denominators = at::_foreach_sqrt(amsgrad ? max_exp_avg_sqs : exp_avg_sqs);
  // Parameters of a group usually share their step count; one Scalar then serves them all.
  if (all_equal(bias_correction2_roots)) {
    at::_foreach_div_(denominators, at::Scalar(bias_correction2_roots.front()));
  } else {
    at::_foreach_div_(denominators, at::ArrayRef<at::Scalar>(to_scalars(bias_correction2_roots)));
  }
  at::_foreach_add_(denominators, at::Scalar(eps));
  if (all_equal(negative_step_sizes)) {
    at::_foreach_addcdiv_(params, exp_avgs, denominators, at::Scalar(negative_step_sizes.front()));
  } else {
    at::_foreach_addcdiv_(params, exp_avgs, denominators, at::ArrayRef<at::Scalar>(to_scalars(negative_step_sizes)));
  }
}

VOLT_INLINE bool fused_adam_takes(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& grads,
                                  const std::vector<at::Tensor>& exp_avgs, const std::vector<at::Tensor>& exp_avg_sqs,
                                  const std::vector<at::Tensor>& max_exp_avg_sqs) {
  const auto dtype = params.front().scalar_type();
  if (dtype != at::kFloat && dtype != at::kDouble && dtype != at::kHalf && dtype != at::kBFloat16) return false;
  return contiguous_of_dtype(params, dtype) && contiguous_of_dtype(grads, dtype) &&
         contiguous_of_dtype(exp_avgs, dtype) && contiguous_of_dtype(exp_avg_sqs, dtype) &&
         contiguous_of_dtype(max_exp_avg_sqs, dtype);
}

VOLT_INLINE void adam_fused_group(bool decoupled_weight_decay, const std::vector<at::Tensor>& params,
                                  const std::vector<at::Tensor>& grads, std::vector<at::Tensor>& exp_avgs,
                                  std::vector<at::Tensor>& exp_avg_sqs, std::vector<at::Tensor>& max_exp_avg_sqs,
                                  const std::vector<std::int64_t>& steps, double lr, double beta1, double beta2, double eps,
                                  double weight_decay, bool amsgrad) {
  const auto device = params.front().device();
  auto host_steps = at::empty({static_cast<std::int64_t>(steps.size())},
                              at::TensorOptions().dtype(at::kFloat).pinned_memory(device.is_cuda()));
  auto* out = host_steps.data_ptr<float>();
  for (std::size_t i = 0; i < steps.size(); ++i) out[i] = static_cast<float>(steps[i]);
  const auto device_steps = device.is_cpu() ? host_steps : host_steps.to(device, /*non_blocking=*/true);
  const auto step_tensors = device_steps.unbind(0);
  compat::fused_adam_(decoupled_weight_decay, params, grads, exp_avgs, exp_avg_sqs,
                      amsgrad ? at::TensorList(max_exp_avg_sqs) : at::TensorList(), step_tensors, lr, beta1, beta2,
                      weight_decay, eps, amsgrad);
}

}  // namespace volt::optim::detail

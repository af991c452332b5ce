/// \file
/// Definitions of the functions declared in volt/optim/capturable.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::optim {

VOLT_INLINE at::Tensor clip_grad_norm_(const std::vector<at::Tensor>& gradients, double max_norm) {
  std::vector<at::Tensor> present;
  present.reserve(gradients.size());
  for (const auto& gradient : gradients) {
    if (gradient.defined()) present.push_back(gradient);
  }
  if (present.empty()) return at::zeros({});
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> norms = compat::foreach_norm(present);
  for (auto& norm : norms) {
    if (norm.scalar_type() != at::kFloat) norm = norm.to(at::kFloat);
  }
  const at::Tensor total = norms.size() == 1 ? norms.front() : at::stack(norms).norm(2);
  const at::Tensor coefficient = (max_norm / (total + 1e-6)).clamp_max(1.0);
  compat::foreach_mul_(present, coefficient);
  return total;
}

VOLT_INLINE void clip_grad_value_(const std::vector<at::Tensor>& gradients, double clip_value) {
  std::vector<at::Tensor> present;
  present.reserve(gradients.size());
  for (const auto& gradient : gradients) {
    if (gradient.defined()) present.push_back(gradient);
  }
  if (present.empty()) return;
  torch::NoGradGuard no_grad;
  compat::foreach_clamp_(present, -clip_value, clip_value);
}

VOLT_INLINE auto CapturableStep::obstacle(torch::optim::Optimizer& optimizer, c10::DeviceType device_type) -> std::optional<std::string> {
  const auto& type = typeid(optimizer);
  const bool adam = type == typeid(torch::optim::Adam);
  const bool adamw = type == typeid(torch::optim::AdamW);
  const bool sgd = type == typeid(torch::optim::SGD);
  if (!adam && !adamw && !sgd) {
    return "the optimizer is " + c10::demangle(type.name()) +
           "; a captured step needs exactly torch::optim::Adam, AdamW or SGD";
  }
  if constexpr (!has_capturable_step) {
    // A stream, not string concatenation: g++ 12 at -O2 and above warns falsely (-Warray-bounds) on that.
    std::ostringstream text;
    text << "LibTorch " << compat::torch_version_string
         << " has no fused optimizer kernels with a tensor learning rate (LibTorch 2.4 or later has them)";
    return text.str();
  } else {
    const char* kernel = adam ? "aten::_fused_adam_" : adamw ? "aten::_fused_adamw_" : "aten::_fused_sgd_";
    if (!compat::has_kernel(kernel, "tensor_lr", device_type)) {
      return std::string("this LibTorch has no ") + kernel + " kernel with a tensor learning rate for " +
             c10::DeviceTypeName(device_type, /*lower_case=*/true);
    }
    return std::nullopt;
  }
}

VOLT_INLINE CapturableStep::CapturableStep(torch::optim::Optimizer& optimizer)
    : optimizer_(&optimizer) {
  const auto& type = typeid(optimizer);
  kind_ = type == typeid(torch::optim::Adam)    ? Kind::adam
          : type == typeid(torch::optim::AdamW) ? Kind::adamw
                                                : Kind::sgd;
  if (kind_ == Kind::adam) {
    bind<torch::optim::AdamOptions, torch::optim::AdamParamState>();
  } else if (kind_ == Kind::adamw) {
    bind<torch::optim::AdamWOptions, torch::optim::AdamWParamState>();
  } else {
    bind<torch::optim::SGDOptions, torch::optim::SGDParamState>();
  }
  reload();
}

VOLT_INLINE void CapturableStep::step(const std::optional<at::Tensor>& found_inf) {
  TORCH_CHECK(has_capturable_step, "volt: CapturableStep needs LibTorch 2.4 or later (this is ",
              compat::torch_version_string, ")");
  torch::NoGradGuard no_grad;
  if (steps_.defined()) steps_.add_(1);
  for (auto& group : groups_) {
    std::vector<at::Tensor> grads;
    grads.reserve(group.params.size());
    for (const auto& parameter : group.params) {
      const auto& grad = parameter.grad();
      TORCH_CHECK(grad.defined(), "volt: a captured optimizer step found a parameter without gradient (shape ",
                  parameter.sizes(), "); every parameter that stepped before must get a gradient");
      grads.push_back(grad);
    }
    const auto& lr = learning_rates_[group.index];
    if (kind_ == Kind::sgd) {
      compat::fused_sgd_tensor_lr_(group.params, grads, group.momentum_buffers, group.weight_decay, group.momentum,
                                   lr, group.dampening, group.nesterov, found_inf);
    } else {
      compat::fused_adam_tensor_lr_(kind_ == Kind::adamw, group.params, grads, group.exp_avgs, group.exp_avg_sqs,
                                    group.max_exp_avg_sqs, group.steps, lr, group.beta1, group.beta2,
                                    group.weight_decay, group.eps, group.amsgrad, found_inf);
    }
  }
  if (found_inf && steps_.defined()) steps_.sub_(*found_inf);
}

VOLT_INLINE void CapturableStep::refresh_learning_rates() {
  for (std::size_t i = 0; i < learning_rates_.size(); ++i) {
    const double lr = host_learning_rate(i);
    if (lr != cached_learning_rates_[i]) {
      learning_rates_[i].fill_(lr);
      cached_learning_rates_[i] = lr;
    }
  }
}

VOLT_INLINE void CapturableStep::write_back() {
  if (!steps_.defined()) return;
  const auto host = steps_.to(at::kCPU, at::kDouble);
  const auto* counts = host.data_ptr<double>();
  for (std::size_t i = 0; i < step_setters_.size(); ++i) step_setters_[i](static_cast<std::int64_t>(counts[i]));
}

VOLT_INLINE void CapturableStep::reload() {
  for (std::size_t i = 0; i < learning_rates_.size(); ++i) {
    cached_learning_rates_[i] = host_learning_rate(i);
    learning_rates_[i].fill_(cached_learning_rates_[i]);
  }
  if (step_getters_.empty()) return;
  auto host = at::empty({static_cast<std::int64_t>(step_getters_.size())}, at::kFloat);
  auto* counts = host.data_ptr<float>();
  for (std::size_t i = 0; i < step_getters_.size(); ++i) counts[i] = static_cast<float>(step_getters_[i]());
  steps_.copy_(host);
}

VOLT_INLINE double CapturableStep::host_learning_rate(std::size_t group) const {
  auto& options = optimizer_->param_groups()[group].options();
  return options.get_lr();
}

}  // namespace volt::optim

/// \file
/// volt::nn::functional::cross_entropy's CUDA path: the kernels of volt/nn/detail/cross_entropy_source.hpp compiled
/// at run time for the class count and logit type at hand, the checks that say whether they apply, and the autograd
/// node that runs the backward one.
///
/// The fused op computes the per-row losses (float32 [rows]) from logits [rows, classes] and int64 targets [rows];
/// the reduction (mean over the rows whose target is not ignore_index, or sum) is LibTorch's own ops on those
/// rows, so autograd hands the node each row's loss gradient and no reduction is written twice.
#pragma once

#include <volt/core/compat.hpp>
#include <volt/nn/detail/cross_entropy_source.hpp>
#include <volt/nn/detail/runtime_kernel.hpp>

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>

namespace volt::nn::detail {

/// The per-row losses' gradient with respect to the logits, written with LibTorch's differentiable ops (for a
/// backward that builds a graph itself: create_graph=true): g * (softmax(x) - (1 - s) * onehot(target) - s / C),
/// zero on ignored rows, in x's type.
inline torch::Tensor cross_entropy_backward_differentiable(const torch::Tensor& x, const torch::Tensor& target,
                                                           const torch::Tensor& grad, std::int64_t ignore_index,
                                                           double label_smoothing) {
  const auto classes = x.size(-1);
  const auto kept = target.ne(ignore_index);
  const auto safe_target = torch::where(kept, target, torch::zeros_like(target));
  const auto onehot = torch::nn::functional::one_hot(safe_target, classes).to(torch::kFloat);
  const auto p = torch::softmax(x.to(torch::kFloat), -1);
  const auto d = p - (1.0 - label_smoothing) * onehot - label_smoothing / static_cast<double>(classes);
  const auto g = grad.to(torch::kFloat).expand({x.size(0)}) * kept.to(torch::kFloat);
  return (d * g.unsqueeze(-1)).to(x.scalar_type());
}

#if defined(VOLT_DETAIL_HAS_RUNTIME_KERNELS)

/// The forward and backward kernels of one variant on one device, compiled on first use (null, with the reason in
/// `*why`, when they cannot be).
inline RuntimeKernelPair cross_entropy_kernels(const CrossEntropyVariant& variant, int device, std::string* why) {
  return runtime_kernel_pair(variant, device, "volt_cross_entropy_forward", "volt_cross_entropy_backward",
                             [](const CrossEntropyVariant& v) { return cross_entropy_source(v); }, why);
}

/// The variant for logits `x` ([rows, classes], contiguous).
inline CrossEntropyVariant cross_entropy_variant(const torch::Tensor& x, double label_smoothing) {
  CrossEntropyVariant variant;
  variant.classes = x.size(-1);
  variant.x_type = kernel_type_code(x.scalar_type());
  variant.vector = variant.classes % 4 == 0 && reinterpret_cast<std::uintptr_t>(x.data_ptr()) % 16 == 0;
  variant.smoothing = label_smoothing > 0;
  return variant;
}

/// The backward node of the fused per-row cross-entropy.
struct FusedCrossEntropyBackward : torch::autograd::Node {
  torch::autograd::SavedVariable x;
  torch::Tensor target, lse;
  CrossEntropyVariant variant;
  std::int64_t ignore_index = -100;
  double label_smoothing = 0;

  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    if (grads.empty() || !grads[0].defined()) return {torch::Tensor()};
    const auto input = x.unpack();
    if (torch::GradMode::is_enabled()) {
      return {cross_entropy_backward_differentiable(input, target, grads[0], ignore_index, label_smoothing)};
    }
    TORCH_CHECK(lse.defined(), "volt::nn::functional::cross_entropy: the fused backward ran twice; its saved tensors "
                               "are freed after the first (use retain_graph=true to run it again)");
    c10::cuda::CUDAGuard guard(input.device());
    // The reduction's backward usually hands an expanded scalar (stride 0): read it as one value.
    auto grad = grads[0].to(torch::kFloat);
    long long grad_stride = 1;
    if (grad.dim() == 0 || grad.stride(0) == 0) {
      grad = grad.reshape({-1}).narrow(0, 0, 1).contiguous();
      grad_stride = 0;
    } else {
      grad = grad.contiguous();
    }
    const auto kernels = cross_entropy_kernels(variant, input.get_device(), nullptr);
    TORCH_CHECK(kernels.backward != nullptr, "volt::nn::functional::cross_entropy: the fused backward kernel is not "
                                             "available");
    auto dx = torch::empty_like(input, torch::MemoryFormat::Contiguous);
    const void* x_ptr = input.data_ptr();
    const void* target_ptr = target.data_ptr();
    const void* lse_ptr = lse.data_ptr();
    const void* grad_ptr = grad.data_ptr();
    void* dx_ptr = dx.data_ptr();
    long long rows = input.size(0);
    long long ignore = ignore_index;
    float smoothing = static_cast<float>(label_smoothing);
    void* arguments[] = {&x_ptr, &target_ptr, &lse_ptr, &grad_ptr, &grad_stride, &dx_ptr, &rows, &ignore, &smoothing};
    kernels.backward->launch(static_cast<unsigned>((rows + 7) / 8), 256, 0, arguments);
    return {dx};
  }

  std::string name() const override { return "FusedCrossEntropyBackward"; }

  void release_variables() override {
    x.reset_data();
    target.reset();
    lse.reset();
  }
};

#endif  // VOLT_DETAIL_HAS_RUNTIME_KERNELS

/// Why the per-row cross-entropy of logits `x` and class indices `target` cannot run fused ("" when it can): the
/// build has runtime kernels; x is a contiguous 2-D CUDA tensor of float, bfloat16 or half with at least one row
/// and one class; target is an int64 tensor on x's device with one value per row; no class weights; the label
/// smoothing is within [0, 1] (LibTorch's op reports any other); and the kernels compile for the device.
inline std::string cross_entropy_unfusable(const torch::Tensor& x, const torch::Tensor& target, bool class_weights,
                                           double label_smoothing) {
#if defined(VOLT_DETAIL_HAS_RUNTIME_KERNELS)
  if (!x.defined() || !x.is_cuda()) return "the input is not a CUDA tensor";
  if (kernel_type_code(x.scalar_type()) < 0) return "the input is not float, bfloat16 or half";
  if (x.dim() != 2) return "the input is not 2-D (rows, classes)";
  if (x.size(0) == 0 || x.size(1) == 0) return "the input is empty";
  if (!x.is_contiguous()) return "the input is not contiguous";
  if (!target.defined() || target.scalar_type() != torch::kLong) return "the target is not int64 class indices";
  if (target.device() != x.device()) return "the target is not on the input's device";
  if (target.dim() != 1 || target.size(0) != x.size(0)) return "the target is not one class index per row";
  if (class_weights) return "class weights are given";
  if (!(label_smoothing >= 0.0 && label_smoothing <= 1.0)) return "the label smoothing is not within [0, 1]";
  std::string why;
  if (cross_entropy_kernels(cross_entropy_variant(x, label_smoothing), x.get_device(), &why).forward == nullptr) {
    return why;
  }
  return "";
#else
  (void)x, (void)target, (void)class_weights, (void)label_smoothing;
  return "this build has no runtime CUDA kernels (VOLT_DETAIL_HAS_RUNTIME_KERNELS: a CUDA LibTorch on Linux)";
#endif
}

/// The per-row losses (float32 [rows]) of logits `x` [rows, classes] and targets [rows] through the fused kernels,
/// differentiable in x; call only where cross_entropy_unfusable returned "".
inline torch::Tensor fused_cross_entropy_rows(const torch::Tensor& x, const torch::Tensor& target,
                                              std::int64_t ignore_index, double label_smoothing) {
#if defined(VOLT_DETAIL_HAS_RUNTIME_KERNELS)
  c10::cuda::CUDAGuard guard(x.device());
  const auto variant = cross_entropy_variant(x, label_smoothing);
  const auto kernels = cross_entropy_kernels(variant, x.get_device(), nullptr);
  TORCH_CHECK(kernels.forward != nullptr, "volt::nn::functional::cross_entropy: the fused kernels are not available");
  const auto targets = target.contiguous();
  long long rows = x.size(0);
  auto loss = torch::empty({rows}, x.options().dtype(torch::kFloat));
  auto lse = torch::empty({rows}, x.options().dtype(torch::kFloat));
  const void* x_ptr = x.data_ptr();
  const void* target_ptr = targets.data_ptr();
  void* loss_ptr = loss.data_ptr();
  void* lse_ptr = lse.data_ptr();
  long long ignore = ignore_index;
  float smoothing = static_cast<float>(label_smoothing);
  void* arguments[] = {&x_ptr, &target_ptr, &loss_ptr, &lse_ptr, &rows, &ignore, &smoothing};
  kernels.forward->launch(static_cast<unsigned>((rows + 7) / 8), 256, 0, arguments);
  if (!(torch::GradMode::is_enabled() && x.requires_grad())) return loss;
  auto node =
      std::shared_ptr<FusedCrossEntropyBackward>(new FusedCrossEntropyBackward(), torch::autograd::deleteNode);
  node->set_next_edges(torch::autograd::collect_next_edges(x));
  torch::autograd::set_history(loss, node);
  node->x = torch::autograd::SavedVariable(x, /*is_output=*/false);
  node->target = targets;
  node->lse = std::move(lse);
  node->variant = variant;
  node->ignore_index = ignore_index;
  node->label_smoothing = label_smoothing;
  return loss;
#else
  (void)x, (void)target, (void)ignore_index, (void)label_smoothing;
  TORCH_CHECK(false, "volt::nn::functional::cross_entropy: this build has no runtime CUDA kernels");
#endif
}

}  // namespace volt::nn::detail

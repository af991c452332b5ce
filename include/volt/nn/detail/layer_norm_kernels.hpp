/// \file
/// volt::nn::LayerNorm's CUDA kernels, compiled at run time (volt/nn/detail/runtime_kernel.hpp) from the sources of
/// volt/nn/detail/layer_norm_source.hpp for the row length and the tensors' types at hand, the checks that say
/// whether they apply, and the autograd node that runs the backward one.
#pragma once

#include <volt/core/compat.hpp>
#include <volt/nn/detail/column_sum.hpp>
#include <volt/nn/detail/layer_norm_source.hpp>
#include <volt/nn/detail/runtime_kernel.hpp>

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#if defined(VOLT_DETAIL_HAS_RUNTIME_KERNELS)
#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#endif

namespace volt::nn::detail {

#if defined(VOLT_DETAIL_HAS_RUNTIME_KERNELS)

/// The forward and backward kernels of one variant on one device, compiled on first use (null, with the reason in
/// `*why`, when they cannot be).
inline RuntimeKernelPair layer_norm_kernels(const LayerNormVariant& variant, int device, std::string* why) {
  return runtime_kernel_pair(variant, device, "volt_layer_norm_forward", "volt_layer_norm_backward",
                             [](const LayerNormVariant& v) { return layer_norm_source(v); }, why);
}

/// LayerNorm's gradients written with LibTorch's differentiable ops (for a backward that builds a graph itself:
/// create_graph=true), from the saved input, weight (may be undefined) and the output's gradient, over the last
/// dimensions of `shape`; the bias's gradient (with `has_bias`) in `bias_type`.
inline torch::autograd::variable_list layer_norm_backward_differentiable(const torch::Tensor& x,
                                                                         const torch::Tensor& weight, bool has_bias,
                                                                         c10::ScalarType bias_type,
                                                                         const std::vector<std::int64_t>& shape,
                                                                         const torch::Tensor& dy, double eps) {
  std::int64_t n = 1;
  for (const auto size : shape) n *= size;
  const auto xf = x.to(torch::kFloat).reshape({-1, n});
  const auto dyf = dy.to(torch::kFloat).reshape({-1, n});
  const auto centred = xf - xf.mean(1, true);
  const auto rstd = (centred.pow(2).mean(1, true) + eps).rsqrt();
  const auto xhat = centred * rstd;
  const auto g = weight.defined() ? dyf * weight.to(torch::kFloat).reshape({1, n}) : dyf;
  const auto dx = rstd * (g - g.mean(1, true) - xhat * (g * xhat).mean(1, true));
  torch::Tensor dweight, dbias;
  if (weight.defined()) dweight = (dyf * xhat).sum(0).view(shape).to(weight.scalar_type());
  if (has_bias) dbias = dyf.sum(0).view(shape).to(bias_type);
  return {dx.view(x.sizes()).to(x.scalar_type()), dweight, dbias};
}

/// The c10 type of a kernel type code (kernel_type_code's inverse).
inline c10::ScalarType layer_norm_scalar_type(int code) {
  return code == 0 ? torch::kFloat : code == 1 ? torch::kBFloat16 : torch::kHalf;
}

/// The backward node of the fused layer norm. Inputs (next edges): x, weight, bias; with a residual x, r, weight,
/// bias. Outputs: y; with a residual h, y.
struct FusedLayerNormBackward : torch::autograd::Node {
  torch::autograd::SavedVariable x, weight;  // x: the normalized input (h, an output, with a residual)
  torch::Tensor mean, rstd;
  LayerNormVariant variant;  // the forward's (y_type is the output's)
  c10::ScalarType bias_type = c10::ScalarType::Float;
  std::vector<std::int64_t> shape;  // the normalized shape (the weight's and bias's)
  double eps = 0;

  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    const torch::Tensor none;
    const bool residual = variant.residual;
    const auto x_type = layer_norm_scalar_type(variant.x_type), r_type = layer_norm_scalar_type(variant.r_type);
    const torch::Tensor dh = residual && !grads.empty() ? grads[0] : torch::Tensor();
    const torch::Tensor dy = grads.size() > (residual ? 1u : 0u) ? grads[residual ? 1 : 0] : torch::Tensor();
    // The gradients of x (and r) from the input gradient of the layer norm `dinput` (may be undefined) and dh.
    auto inputs = [&](torch::Tensor dinput) -> torch::autograd::variable_list {
      if (!residual) return {dinput};
      if (dh.defined()) dinput = dinput.defined() ? dinput + dh : dh;
      if (!dinput.defined()) return {none, none};
      return {dinput.to(x_type), dinput.to(r_type)};
    };
    auto with_parameters = [&](torch::autograd::variable_list result, torch::Tensor dweight, torch::Tensor dbias) {
      result.push_back(std::move(dweight));
      result.push_back(std::move(dbias));
      return result;
    };
    if (!dy.defined()) return with_parameters(inputs(none), none, none);
    const auto input = x.unpack(shared_from_this());
    const auto scale = weight.unpack();
    if (torch::GradMode::is_enabled()) {
      auto grads_of = layer_norm_backward_differentiable(input, scale, variant.has_bias, bias_type, shape, dy, eps);
      return with_parameters(inputs(grads_of[0]), grads_of[1], grads_of[2]);
    }
    TORCH_CHECK(mean.defined(), "volt::nn::LayerNorm: the fused backward ran twice; its saved tensors are freed "
                                "after the first (use retain_graph=true to run it again)");
    c10::cuda::CUDAGuard guard(input.device());
    const auto n = variant.n;
    const auto rows = input.numel() / n;
    auto dy_ready = dy;
    const auto output_type = layer_norm_scalar_type(variant.y_type);
    if (dy_ready.scalar_type() != output_type) dy_ready = dy_ready.to(output_type);
    dy_ready = dy_ready.contiguous();
    torch::Tensor dh_ready;
    if (residual && dh.defined()) dh_ready = dh.to(input.scalar_type()).contiguous();
    const int device = input.get_device();
    const auto kernels = layer_norm_kernels(variant, device, nullptr);
    TORCH_CHECK(kernels.backward != nullptr, "volt::nn::LayerNorm: the fused backward kernel is not available");
    auto dx = torch::empty(input.sizes(), input.options().dtype(x_type));
    // With one type for x and r, one tensor is both gradients (as LibTorch's add returns for its two inputs).
    torch::Tensor dr;
    if (residual) dr = r_type == x_type ? dx : torch::empty(input.sizes(), input.options().dtype(r_type));
    const bool sums = variant.has_weight || variant.has_bias;
    const std::int64_t blocks =
        std::max<std::int64_t>(1, std::min<std::int64_t>((rows + 7) / 8, 4 * multiprocessor_count(device)));
    auto partial = sums ? torch::empty({blocks, 2, n}, input.options().dtype(torch::kFloat)) : torch::Tensor();
    const void* dy_ptr = dy_ready.data_ptr();
    const void* x_ptr = input.data_ptr();
    const void* w_ptr = scale.defined() ? scale.data_ptr() : nullptr;
    const void* mean_ptr = mean.data_ptr();
    const void* rstd_ptr = rstd.data_ptr();
    const void* dh_ptr = dh_ready.defined() ? dh_ready.data_ptr() : nullptr;
    void* dx_ptr = dx.data_ptr();
    void* dr_ptr = residual && r_type != x_type ? dr.data_ptr() : nullptr;
    void* partial_ptr = sums ? partial.data_ptr() : nullptr;
    long long rows_arg = rows;
    void* arguments[] = {&dy_ptr, &x_ptr,  &w_ptr,       &mean_ptr, &rstd_ptr,
                         &dh_ptr, &dx_ptr, &dr_ptr, &partial_ptr, &rows_arg};
    kernels.backward->launch(static_cast<unsigned>(blocks), 256, 0, arguments);
    torch::Tensor dweight, dbias;
    if (sums) {
      const auto totals = column_total(partial.view({blocks, 2 * n}), torch::kFloat).view({2, n});
      if (variant.has_weight) dweight = totals[0].view(shape).to(scale.scalar_type());
      if (variant.has_bias) dbias = totals[1].view(shape).to(bias_type);
    }
    if (!residual) return {dx, dweight, dbias};
    return {dx, dr, dweight, dbias};
  }

  std::string name() const override {
    return variant.residual ? "FusedAddLayerNormBackward" : "FusedLayerNormBackward";
  }

  void release_variables() override {
    x.reset_data();
    weight.reset_data();
    mean.reset();
    rstd.reset();
  }
};

#endif  // VOLT_DETAIL_HAS_RUNTIME_KERNELS

/// Why `layer_norm(x)` over the last `n` values with this weight and bias cannot run fused ("" when it can): the
/// build has runtime kernels, x is a contiguous CUDA tensor of float, bfloat16 or half with 16-byte aligned data,
/// n is a multiple of 4 up to 1024, weight and bias (where defined) are contiguous on x's device in one of those
/// types, the output type is one of them, and the kernels compile for the device. With a defined `residual`, for
/// layer_norm(x + residual): the residual is too, with x's shape, and the two types promote to one of those types.
inline std::string layer_norm_unfusable(const torch::Tensor& x, std::int64_t n, const torch::Tensor& weight,
                                        const torch::Tensor& bias, c10::ScalarType output_type,
                                        const torch::Tensor& residual = torch::Tensor()) {
#if defined(VOLT_DETAIL_HAS_RUNTIME_KERNELS)
  if (!x.defined() || !x.is_cuda()) return "the input is not a CUDA tensor";
  if (kernel_type_code(x.scalar_type()) < 0 || kernel_type_code(output_type) < 0) {
    return "the input and output must be float, bfloat16 or half";
  }
  if (n % layer_norm_row_multiple != 0 || n > layer_norm_max_row) {
    return "the normalized size " + std::to_string(n) + " is not a multiple of 4 up to 1024";
  }
  if (!x.is_contiguous() || reinterpret_cast<std::uintptr_t>(x.data_ptr()) % 16 != 0) {
    return "the input is not contiguous with 16-byte aligned data";
  }
  if (x.numel() == 0) return "the input is empty";
  if (residual.defined()) {
    if (!residual.is_cuda() || residual.device() != x.device()) return "the residual is not on the input's device";
    if (residual.sizes() != x.sizes()) return "the residual's shape differs from the input's";
    if (kernel_type_code(residual.scalar_type()) < 0 ||
        kernel_type_code(c10::promoteTypes(x.scalar_type(), residual.scalar_type())) < 0) {
      return "the residual must be float, bfloat16 or half";
    }
    if (!residual.is_contiguous() || reinterpret_cast<std::uintptr_t>(residual.data_ptr()) % 16 != 0) {
      return "the residual is not contiguous with 16-byte aligned data";
    }
  }
  if (weight.defined() && bias.defined() && weight.scalar_type() != bias.scalar_type()) {
    return "the weight and bias differ in type";
  }
  for (const auto* p : {&weight, &bias}) {
    if (!p->defined()) continue;
    if (p->device() != x.device() || !p->is_contiguous() || kernel_type_code(p->scalar_type()) < 0 ||
        reinterpret_cast<std::uintptr_t>(p->data_ptr()) % 16 != 0) {
      return "the weight and bias must be contiguous, aligned float, bfloat16 or half tensors on the input's device";
    }
  }
  const auto variant = layer_norm_variant(x, n, weight, bias, output_type, residual);
  std::string why;
  if (layer_norm_kernels(variant, x.get_device(), &why).forward == nullptr) return why;
  return "";
#else
  (void)x, (void)n, (void)weight, (void)bias, (void)output_type, (void)residual;
  return "this build has no runtime CUDA kernels (VOLT_DETAIL_HAS_RUNTIME_KERNELS: a CUDA LibTorch on Linux)";
#endif
}

/// h = x + residual (when `residual` is defined; else h is x and not returned) and y = layer_norm(h) over the last
/// dimensions, of sizes `shape`, through the fused kernels, differentiable in x, residual, weight and bias; call only
/// where layer_norm_unfusable returned "". y has x's shape and `output_type`; h the promoted type of x and residual.
/// Returns {h (undefined without a residual), y}.
inline std::pair<torch::Tensor, torch::Tensor> fused_add_layer_norm(const torch::Tensor& x,
                                                                    const torch::Tensor& residual,
                                                                    const std::vector<std::int64_t>& shape,
                                                                    const torch::Tensor& weight,
                                                                    const torch::Tensor& bias, double eps,
                                                                    c10::ScalarType output_type) {
#if defined(VOLT_DETAIL_HAS_RUNTIME_KERNELS)
  c10::cuda::CUDAGuard guard(x.device());
  std::int64_t n = 1;
  for (const auto size : shape) n *= size;
  const auto variant = layer_norm_variant(x, n, weight, bias, output_type, residual);
  const int device = x.get_device();
  const auto kernels = layer_norm_kernels(variant, device, nullptr);
  TORCH_CHECK(kernels.forward != nullptr, "volt::nn::LayerNorm: the fused kernels are not available");
  const auto rows = x.numel() / n;
  auto y = torch::empty(x.sizes(), x.options().dtype(output_type));
  torch::Tensor h;
  if (variant.residual) h = torch::empty(x.sizes(), x.options().dtype(layer_norm_scalar_type(variant.h_type)));
  auto mean = torch::empty({rows}, x.options().dtype(torch::kFloat));
  auto rstd = torch::empty({rows}, x.options().dtype(torch::kFloat));
  const void* x_ptr = x.data_ptr();
  const void* r_ptr = variant.residual ? residual.data_ptr() : nullptr;
  const void* w_ptr = weight.defined() ? weight.data_ptr() : nullptr;
  const void* b_ptr = bias.defined() ? bias.data_ptr() : nullptr;
  void* h_ptr = variant.residual ? h.data_ptr() : nullptr;
  void* y_ptr = y.data_ptr();
  void* mean_ptr = mean.data_ptr();
  void* rstd_ptr = rstd.data_ptr();
  long long rows_arg = rows;
  float eps_arg = static_cast<float>(eps);
  void* arguments[] = {&x_ptr, &r_ptr, &w_ptr, &b_ptr, &h_ptr, &y_ptr, &mean_ptr, &rstd_ptr, &rows_arg, &eps_arg};
  kernels.forward->launch(static_cast<unsigned>((rows + 7) / 8), 256, 0, arguments);
  const bool differentiable =
      torch::GradMode::is_enabled() &&
      (x.requires_grad() || (variant.residual && residual.requires_grad()) ||
       (weight.defined() && weight.requires_grad()) || (bias.defined() && bias.requires_grad()));
  if (!differentiable) return {h, y};
  auto node = std::shared_ptr<FusedLayerNormBackward>(new FusedLayerNormBackward(), torch::autograd::deleteNode);
  if (variant.residual) {
    node->set_next_edges(torch::autograd::collect_next_edges(x, residual, weight, bias));
    torch::autograd::set_history(h, node);
    torch::autograd::set_history(y, node);
    node->x = torch::autograd::SavedVariable(h, /*is_output=*/true);
  } else {
    node->set_next_edges(torch::autograd::collect_next_edges(x, weight, bias));
    torch::autograd::set_history(y, node);
    node->x = torch::autograd::SavedVariable(x, /*is_output=*/false);
  }
  node->weight = torch::autograd::SavedVariable(weight, /*is_output=*/false);
  node->mean = std::move(mean);
  node->rstd = std::move(rstd);
  node->variant = variant;
  if (bias.defined()) node->bias_type = bias.scalar_type();
  node->shape = shape;
  node->eps = eps;
  return {h, y};
#else
  (void)x, (void)residual, (void)shape, (void)weight, (void)bias, (void)eps, (void)output_type;
  TORCH_CHECK(false, "volt::nn::LayerNorm: this build has no runtime CUDA kernels");
#endif
}

/// layer_norm(x) over the last dimensions, of sizes `shape`, through the fused kernels, differentiable in x, weight
/// and bias; call only where layer_norm_unfusable returned "". The output has x's shape and `output_type`.
inline torch::Tensor fused_layer_norm(const torch::Tensor& x, const std::vector<std::int64_t>& shape,
                                      const torch::Tensor& weight, const torch::Tensor& bias, double eps,
                                      c10::ScalarType output_type) {
  return fused_add_layer_norm(x, torch::Tensor(), shape, weight, bias, eps, output_type).second;
}

}  // namespace volt::nn::detail

/// \file
/// volt::nn::functional::split_qkv: the query, key and value heads of a fused q/k/v projection, as views, with a
/// backward that writes each head gradient straight into the projection's gradient.
///
/// The usual split of a (batch, length, 3 * d) projection, `view(batch, length, 3, heads, head_size)`, `permute` to
/// (3, batch, heads, length, head_size) and `unbind` (Python's `q, k, v = ...`), costs nothing forward, but its
/// backward stacks the three gradients into a new (3, batch, heads, length, head_size) tensor and then copies that
/// again into the projection's layout (the view's backward of a permuted tensor): two passes over the gradient, the
/// first of them LibTorch's concatenation kernel. On the GPT of volt's benchmarks those took 0.81 ms of a 7.3 ms step
/// on an H100 (6 layers, batch 64, length 256, d 384). split_qkv returns the same three views; its backward writes
/// each head gradient straight into its place in one (batch, length, 3 * d) tensor: on CUDA one gather kernel of
/// volt's (detail/split_qkv_kernel.hpp: 0.15 ms for a step's 6 on an H100), elsewhere one strided copy each (on the
/// same H100 LibTorch's 18 copies took 0.30 ms).
///
///   auto [q, k, v] = volt::nn::functional::split_qkv(qkv_projection(x), heads);
///   auto y = torch::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true);
#pragma once

#include <volt/nn/detail/split_qkv_kernel.hpp>

#include <torch/csrc/autograd/functions/utils.h>  // set_history, collect_next_edges
#include <torch/torch.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace volt::nn {

namespace detail {

/// The backward of split_qkv: the three head gradients (any may be undefined: zeros there) into the projection's
/// (batch, length, 3 * heads * head_size) layout: on CUDA in one pass by split_qkv_kernel.hpp's gather kernel where
/// split_qkv_unfusable allows, else one strided copy per gradient.
struct SplitQkvBackward : torch::autograd::Node {
  std::int64_t batch = 0, length = 0, heads = 0, head_size = 0;
  c10::ScalarType type = c10::ScalarType::Float;
  c10::Device device = c10::Device(c10::DeviceType::CPU);

  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    bool any = false;
    for (const auto& g : grads) any = any || g.defined();
    if (!any) return {torch::Tensor()};
    const auto options = torch::TensorOptions().dtype(type).device(device);
    if (torch::GradMode::is_enabled()) {  // double backward: differentiable ops
      std::vector<torch::Tensor> parts;
      for (const auto& g : grads) {
        parts.push_back(g.defined() ? g : torch::zeros({batch, heads, length, head_size}, options));
      }
      return {torch::stack(parts).permute({1, 3, 0, 2, 4}).reshape({batch, length, 3 * heads * head_size})};
    }
    if (device.is_cuda() && split_qkv_unfusable(grads, batch, length, heads, head_size, type, device).empty()) {
      return {split_qkv_gather(grads, batch, length, heads, head_size, type, device)};
    }
    auto grad = torch::empty({batch, length, 3, heads, head_size}, options);
    for (std::int64_t i = 0; i < 3; ++i) {
      auto place = grad.select(2, i);  // (batch, length, heads, head_size)
      const auto& g = grads[static_cast<std::size_t>(i)];
      if (g.defined()) {
        place.copy_(g.transpose(1, 2));
      } else {
        place.zero_();
      }
    }
    return {grad.view({batch, length, 3 * heads * head_size})};
  }

  std::string name() const override { return "SplitQkvBackward"; }
};

}  // namespace detail

namespace functional {

/// q, k and v, each (batch, heads, length, head_size), from a fused projection `qkv` of shape
/// (batch, length, 3 * heads * head_size) laid out as [q | k | v], each part [head 0 | head 1 | ...]: the same
/// views as `qkv.view({batch, length, 3, heads, head_size}).permute({2, 0, 3, 1, 4}).unbind(0)`, and the same
/// gradient, written without the intermediate stacked tensor (volt/nn/attention.hpp). The views share qkv's storage and version counter.
inline std::array<torch::Tensor, 3> split_qkv(const torch::Tensor& qkv, std::int64_t heads) {
  TORCH_CHECK(qkv.defined() && qkv.dim() == 3, "volt::nn::functional::split_qkv: expected qkv of shape (batch, "
                                               "length, 3 * heads * head_size), got ",
              qkv.defined() ? qkv.sizes() : torch::IntArrayRef{});
  TORCH_CHECK(heads > 0 && qkv.size(2) % (3 * heads) == 0, "volt::nn::functional::split_qkv: the last dimension (",
              qkv.size(2), ") is not 3 * heads * head_size for heads=", heads);
  const auto batch = qkv.size(0), length = qkv.size(1), head_size = qkv.size(2) / (3 * heads);
  auto split = [&](const torch::Tensor& t) {
    return t.view({batch, length, 3, heads, head_size}).permute({2, 0, 3, 1, 4}).unbind(0);
  };
  if (!(torch::GradMode::is_enabled() && qkv.requires_grad())) {
    const auto parts = split(qkv);
    return {parts[0], parts[1], parts[2]};
  }
  const auto parts = split(qkv.detach());
  auto node = std::shared_ptr<detail::SplitQkvBackward>(new detail::SplitQkvBackward(), torch::autograd::deleteNode);
  node->set_next_edges(torch::autograd::collect_next_edges(qkv));
  node->batch = batch;
  node->length = length;
  node->heads = heads;
  node->head_size = head_size;
  node->type = qkv.scalar_type();
  node->device = qkv.device();
  std::array<torch::Tensor, 3> out;
  for (std::size_t i = 0; i < 3; ++i) {
    out[i] = torch::autograd::make_variable_non_differentiable_view(qkv, parts[i]);
    torch::autograd::set_history(out[i], node);
  }
  return out;
}

}  // namespace functional

}  // namespace volt::nn

/// \file
/// volt::nn::Linear: torch::nn::Linear computed as PyTorch's nn.Linear computes it.
///
/// LibTorch's C++ torch::nn::Linear (torch::nn::functional::linear) takes ATen's fused path, addmm with the bias
/// folded into the matmul, only for 2-D inputs; for a (batch, sequence, features) input it runs a matmul and then
/// adds the bias in place as a separate kernel. Under autocast that add reads a bfloat16 or half output and a
/// float32 bias, which LibTorch runs through its generic mixed-type loop (measured on one H200 for the small GPT of
/// volt's benchmarks: 24 such adds, 1.48 ms of an 11 ms training step). PyTorch's nn.Linear calls ATen's
/// `linear` instead, which folds the leading dimensions into one and runs addmm, so the bias add happens in the
/// matmul's epilogue (cuBLASLt on CUDA). volt::nn::Linear calls that same `at::linear`: the same result as
/// PyTorch's nn.Linear, for inputs of any rank, on every device.
///
/// It holds what torch::nn::Linear holds, under the same names (`weight` [out, in], `bias` [out]), made from
/// torch::nn::LinearOptions and initialised by torch::nn::Linear's own initialisation (the same random numbers for
/// the same seed), so state dicts and checkpoints move between the two, and PyTorch's nn.Linear, unchanged.
///
///   volt::nn::Linear fc(384, 1536);                      // fc->forward(x) for x of shape (..., 384)
///   volt::nn::Linear head(torch::nn::LinearOptions(384, 8192).bias(false));
///   auto hidden = fc->forward_gelu(x);                   // torch::gelu(fc(x)), one backward kernel on CUDA
#pragma once

#include <volt/nn/detail/column_sum.hpp>
#include <volt/nn/detail/gelu_bias_kernel.hpp>

#include <torch/csrc/autograd/functions/utils.h>  // set_history, collect_next_edges
#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>

namespace volt::nn {

namespace detail {

/// The node that hands a linear layer's output gradient through unchanged and gives the bias its gradient: the
/// column sum of the output gradient, in the bias's type, from volt's column-sum kernel on CUDA (column_sum.hpp;
/// LibTorch's `sum(0)` in the matmul's backward ran at about a third of the memory bandwidth on an H100: the GPT
/// benchmark's 24 bias gradients took 0.72 ms of a 7.3 ms step). The matmul runs with a detached bias, so its own
/// backward computes no bias gradient. Next edges: the matmul's output, the bias. LinearImpl::forward uses it for
/// CUDA inputs when the bias is trained; under create_graph (double backward) the sum is LibTorch's, differentiable.
struct LinearBiasBackward : torch::autograd::Node {
  c10::ScalarType bias_type = c10::ScalarType::Float;
  std::int64_t features = 0;

  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    if (grads.empty() || !grads[0].defined()) return {torch::Tensor(), torch::Tensor()};
    const auto& dy = grads[0];
    const auto rows = dy.reshape({-1, features});
    torch::Tensor dbias;
    if (!torch::GradMode::is_enabled() && column_sum_unfusable(rows).empty()) {
      dbias = column_sum(rows, bias_type);
    } else {
      dbias = rows.sum(0, /*keepdim=*/false, torch::kFloat).to(bias_type);
    }
    return {dy, dbias};
  }

  std::string name() const override { return "LinearBiasBackward"; }
};

/// at::linear(input, weight, bias) with the bias's gradient from LinearBiasBackward.
inline torch::Tensor linear_with_bias_node(const torch::Tensor& input, const torch::Tensor& weight,
                                           const torch::Tensor& bias) {
  auto raw = torch::linear(input, weight, bias.detach());
  auto out = torch::autograd::make_variable_non_differentiable_view(raw, raw);
  auto node = std::shared_ptr<LinearBiasBackward>(new LinearBiasBackward(), torch::autograd::deleteNode);
  node->set_next_edges(torch::autograd::collect_next_edges(raw, bias));
  node->bias_type = bias.scalar_type();
  node->features = bias.numel();
  torch::autograd::set_history(out, node);
  return out;
}

/// torch::gelu's `approximate` argument as a flag: false for "none", true for "tanh"; anything else is an error
/// that names what is allowed.
inline bool gelu_uses_tanh(const std::string& approximate) {
  TORCH_CHECK(approximate == "none" || approximate == "tanh", "volt::nn: approximate must be \"none\" or \"tanh\" (as "
              "torch::gelu), got \"", approximate, "\"");
  return approximate == "tanh";
}

/// The node of gelu(linear(x, W, b)) that takes the activation's gradient back to the matmul's output and gives the
/// bias its gradient, both from one kernel on CUDA (gelu_bias_kernel.hpp). The matmul runs with a detached bias.
/// Next edges: the matmul's output, the bias. Saves the matmul's output z, as LibTorch's GeluBackward does. Under
/// create_graph (double backward) it runs LibTorch's differentiable gelu_backward and sum.
struct LinearGeluBackward : torch::autograd::Node {
  torch::autograd::SavedVariable z;
  bool tanh = false;
  c10::ScalarType bias_type = c10::ScalarType::Float;
  std::int64_t features = 0;

  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    if (grads.empty() || !grads[0].defined()) return {torch::Tensor(), torch::Tensor()};
    const auto saved = z.unpack();
    TORCH_CHECK(saved.defined(), "volt::nn::Linear::forward_gelu: the backward ran twice; its saved tensors are freed "
                                 "after the first (use retain_graph=true to run it again)");
    const auto dh = grads[0].to(saved.scalar_type()).contiguous();
    if (!torch::GradMode::is_enabled()) {
      const auto rows = dh.view({-1, features});
      const auto z_rows = saved.reshape({-1, features});
      if (gelu_bias_unfusable(rows, z_rows, tanh).empty()) {
        auto [dz, dbias] = gelu_bias_backward(rows, z_rows, tanh, bias_type);
        return {dz.view(saved.sizes()), dbias};
      }
    }
    auto dz = torch::gelu_backward(dh, saved, tanh ? "tanh" : "none");
    auto dbias = dz.reshape({-1, features}).sum(0, /*keepdim=*/false, torch::kFloat).to(bias_type);
    return {dz, dbias};
  }

  void release_variables() override { z.reset_data(); }

  std::string name() const override { return "LinearGeluBackward"; }
};

/// gelu(at::linear(input, weight, bias)) with the activation's and the bias's gradients from LinearGeluBackward.
inline torch::Tensor linear_gelu_with_node(const torch::Tensor& input, const torch::Tensor& weight,
                                           const torch::Tensor& bias, bool tanh) {
  auto z = torch::linear(input, weight, bias.detach());
  torch::Tensor raw;
  {
    torch::NoGradGuard no_grad;
    raw = torch::gelu(z, tanh ? "tanh" : "none");
  }
  auto out = torch::autograd::make_variable_non_differentiable_view(raw, raw);
  auto node = std::shared_ptr<LinearGeluBackward>(new LinearGeluBackward(), torch::autograd::deleteNode);
  node->set_next_edges(torch::autograd::collect_next_edges(z, bias));
  node->z = torch::autograd::SavedVariable(z, /*is_output=*/false);
  node->tanh = tanh;
  node->bias_type = bias.scalar_type();
  node->features = bias.numel();
  torch::autograd::set_history(out, node);
  return out;
}

}  // namespace detail

/// y = x W^T + b over the last dimension, as PyTorch's nn.Linear (volt/nn/linear.hpp).
class LinearImpl : public torch::nn::Cloneable<LinearImpl> {
 public:
  /// `in_features` to `out_features`, with a bias.
  LinearImpl(std::int64_t in_features, std::int64_t out_features)
      : LinearImpl(torch::nn::LinearOptions(in_features, out_features)) {}

  /// With torch::nn::Linear's options.
  explicit LinearImpl(const torch::nn::LinearOptions& options) : options(options) { LinearImpl::reset(); }

  /// Registers `weight` and `bias` (undefined without a bias) and initialises them as torch::nn::Linear does.
  void reset() override {
    TORCH_CHECK(options.in_features() > 0 && options.out_features() > 0,
                "volt::nn::Linear: in_features and out_features must be positive, got ", options.in_features(),
                " and ", options.out_features());
    torch::nn::Linear initial(options);
    weight = register_parameter("weight", initial->weight.detach());
    if (options.bias()) {
      bias = register_parameter("bias", initial->bias.detach());
    } else {
      bias = register_parameter("bias", torch::Tensor(), /*requires_grad=*/false);
    }
  }

  /// New random weight and bias, drawn exactly as torch::nn::Linear's reset_parameters draws them (in place: the
  /// parameters keep their device and type).
  void reset_parameters() {
    torch::nn::Linear fresh(options);
    torch::NoGradGuard no_grad;
    weight.copy_(fresh->weight);
    if (bias.defined()) bias.copy_(fresh->bias);
  }

  /// `input` (..., in_features) to (..., out_features) through ATen's linear.
  torch::Tensor forward(const torch::Tensor& input) {
    check_input(input);
    // On CUDA a trained bias gets its gradient from volt's column-sum kernel (detail::LinearBiasBackward).
    if (bias_node_applies(input)) {
      return detail::linear_with_bias_node(input, weight, bias);
    }
    return torch::linear(input, weight, bias);
  }

  /// gelu(forward(input)), as `torch::gelu(linear(input), approximate)` ("none" or "tanh"). On CUDA, with a trained
  /// bias, one kernel of volt's takes the activation's gradient and the bias's (detail::LinearGeluBackward): the
  /// bias gradient is summed as the activation's gradient is written, not read back from memory.
  torch::Tensor forward_gelu(const torch::Tensor& input, const std::string& approximate = "none") {
    const bool tanh = detail::gelu_uses_tanh(approximate);
    check_input(input);
    if (bias_node_applies(input)) {
      return detail::linear_gelu_with_node(input, weight, bias, tanh);
    }
    return torch::gelu(torch::linear(input, weight, bias), approximate);
  }

  /// `volt::nn::Linear(in_features=384, out_features=1536, bias=true)`.
  void pretty_print(std::ostream& stream) const override {
    stream << std::boolalpha << "volt::nn::Linear(in_features=" << options.in_features()
           << ", out_features=" << options.out_features() << ", bias=" << options.bias() << ")";
  }

  /// The options the module was made with.
  torch::nn::LinearOptions options;
  /// The weight, [out_features, in_features].
  torch::Tensor weight;
  /// The bias, [out_features]; undefined when options.bias() is false.
  torch::Tensor bias;

 private:
  /// Whether the bias gets its gradient from a node of volt's (CUDA input, trained bias, autograd recording).
  bool bias_node_applies(const torch::Tensor& input) const {
    return bias.defined() && bias.requires_grad() && input.is_cuda() && torch::GradMode::is_enabled();
  }

  void check_input(const torch::Tensor& input) const {
    TORCH_CHECK(input.defined(), "volt::nn::Linear: the input is an undefined tensor");
    TORCH_CHECK(input.dim() >= 1 && input.size(-1) == options.in_features(), "volt::nn::Linear: expected an input "
                "whose last dimension is in_features=", options.in_features(), ", got an input of shape ",
                input.sizes());
  }
};

/// A ModuleHolder for LinearImpl (as TORCH_MODULE makes for LibTorch's modules).
TORCH_MODULE(Linear);

}  // namespace volt::nn

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
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <ostream>

namespace volt::nn {

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
    TORCH_CHECK(input.defined(), "volt::nn::Linear: the input is an undefined tensor");
    TORCH_CHECK(input.dim() >= 1 && input.size(-1) == options.in_features(), "volt::nn::Linear: expected an input "
                "whose last dimension is in_features=", options.in_features(), ", got an input of shape ",
                input.sizes());
    return torch::linear(input, weight, bias);
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
};

/// A ModuleHolder for LinearImpl (as TORCH_MODULE makes for LibTorch's modules).
TORCH_MODULE(Linear);

}  // namespace volt::nn

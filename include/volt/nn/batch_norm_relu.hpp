/// \file
/// Batch norm fused with what follows it in a convolutional network: volt::nn::BatchNormReLU2d computes
/// `relu(batch_norm(x))` and volt::nn::BatchNormAddReLU2d computes `relu(batch_norm(x) + residual)`, the end of a
/// residual block.
///
/// On CUDA, in training mode, with a channels-last input of half, bfloat16 or float (what a convolution gives under
/// autocast with `memory_format = channels_last`), both run cuDNN's fused NHWC kernels: one kernel forward and
/// one backward instead of LibTorch's batch norm, add and ReLU (volt/nn/detail/cudnn_batch_norm.hpp). Everywhere
/// else (CPU, MPS, evaluation, contiguous inputs, a build without cudnn.h) they run exactly LibTorch's
/// `torch::batch_norm`, `+` and `torch::relu`, so results there equal `BatchNorm2d` followed by `ReLU` bit for bit.
///
/// Both modules hold what `torch::nn::BatchNorm2d` holds, under the same names (`weight`, `bias`,
/// `running_mean`, `running_var`, `num_batches_tracked`), with the same options and initialisation: a
/// state dict or checkpoint moves between them and BatchNorm2d (LibTorch's or PyTorch's) unchanged.
///
///   volt::nn::BatchNormReLU2d bn1(64);                    // y = relu(bn1(conv1(x)))
///   volt::nn::BatchNormAddReLU2d bn2(64);                 // out = relu(bn2(conv2(y)) + shortcut)
///   auto out = bn2->forward(conv2->forward(bn1->forward(conv1->forward(x))), shortcut);
#pragma once

#include <volt/core/compat.hpp>
#include <volt/nn/detail/cudnn_batch_norm.hpp>

#include <torch/torch.h>

#include <cstdint>
#include <ostream>
#include <string>

namespace volt::nn {

namespace detail {

/// The state and arithmetic both modules share; Derived is the module (for torch::nn::Cloneable's clone).
template <typename Derived>
class BatchNormActivationBase : public torch::nn::Cloneable<Derived> {
 public:
  /// A module for `num_features` channels with BatchNorm2d's default options.
  explicit BatchNormActivationBase(std::int64_t num_features)
      : BatchNormActivationBase(torch::nn::BatchNormOptions(num_features)) {}
  /// A module with BatchNorm2d's options (eps, momentum, affine, track_running_stats).
  explicit BatchNormActivationBase(const torch::nn::BatchNormOptions& options) : options(options) {
    BatchNormActivationBase::reset();
  }

  /// Registers the parameters and buffers under BatchNorm2d's names and initialises them (Cloneable::clone
  /// calls it too).
  void reset() override {
    const auto c = options.num_features();
    TORCH_CHECK(c > 0, "volt::nn: num_features must be positive, got ", c);
    if (options.affine()) {
      weight = this->register_parameter("weight", torch::empty({c}));
      bias = this->register_parameter("bias", torch::empty({c}));
    } else {
      weight = this->register_parameter("weight", torch::Tensor(), /*requires_grad=*/false);
      bias = this->register_parameter("bias", torch::Tensor(), /*requires_grad=*/false);
    }
    if (options.track_running_stats()) {
      running_mean = this->register_buffer("running_mean", torch::zeros({c}));
      running_var = this->register_buffer("running_var", torch::ones({c}));
      num_batches_tracked = this->register_buffer("num_batches_tracked", torch::tensor(0, torch::kLong));
    } else {
      running_mean = this->register_buffer("running_mean", torch::Tensor());
      running_var = this->register_buffer("running_var", torch::Tensor());
      num_batches_tracked = this->register_buffer("num_batches_tracked", torch::Tensor());
    }
    reset_parameters();
  }

  /// Running mean 0, running variance 1, no batches tracked (BatchNorm2d's reset_running_stats).
  void reset_running_stats() {
    if (!options.track_running_stats()) return;
    torch::NoGradGuard no_grad;
    running_mean.zero_();
    running_var.fill_(1);
    num_batches_tracked.zero_();
  }

  /// The running statistics reset, weight 1 and bias 0 (BatchNorm2d's reset_parameters).
  void reset_parameters() {
    reset_running_stats();
    if (!options.affine()) return;
    torch::NoGradGuard no_grad;
    weight.fill_(1);
    bias.zero_();
  }

  /// Whether a forward call in the current mode would run cuDNN's fused kernels for this input (and residual).
  bool fuses(const torch::Tensor& input, const torch::Tensor& residual = {}) const {
    return this->is_training() && options.affine() && detail::cudnn_fusable(input, residual, weight, bias);
  }

  /// The options the module was made with.
  torch::nn::BatchNormOptions options;
  /// Per-channel scale (`weight`) and shift (`bias`); undefined when `affine` is false.
  torch::Tensor weight, bias;
  /// Running statistics and the count of batches they have seen; undefined when `track_running_stats` is false.
  torch::Tensor running_mean, running_var, num_batches_tracked;

 protected:
  /// relu(batch_norm(input) [+ residual]), fused where `fuses` holds; `name` is the module's, for messages.
  torch::Tensor run(const torch::Tensor& input, const torch::Tensor& residual, const char* name) {
    TORCH_CHECK(input.dim() == 4, "volt::nn::", name, ": expected a 4-D input (N, C, H, W), got a ", input.dim(),
                "-D tensor of shape ", input.sizes());
    TORCH_CHECK(input.size(1) == options.num_features(), "volt::nn::", name, ": the input has ", input.size(1),
                " channels (shape ", input.sizes(), "), the module was made for ", options.num_features());
    if (residual.defined()) {
      TORCH_CHECK(residual.sizes() == input.sizes(), "volt::nn::", name, ": the residual's shape ",
                  residual.sizes(), " differs from the input's ", input.sizes());
    }
    // BatchNorm2d's rule: count the batch, and use momentum or, without one, the cumulative average.
    double factor = 0.0;
    if (this->is_training() && options.track_running_stats()) {
      {
        torch::NoGradGuard no_grad;
        num_batches_tracked.add_(1);
      }
      factor = options.momentum() ? *options.momentum() : 1.0 / num_batches_tracked.item<double>();
    }
    const bool batch_statistics = this->is_training() || !options.track_running_stats();
    if (batch_statistics && fuses(input, residual)) {
      return detail::cudnn_batch_norm_relu(input, residual, weight, bias, running_mean, running_var, factor,
                                           options.eps());
    }
    auto y = torch::nn::functional::batch_norm(input, running_mean, running_var,
                                               torch::nn::functional::BatchNormFuncOptions()
                                                   .weight(weight)
                                                   .bias(bias)
                                                   .training(batch_statistics)
                                                   .momentum(factor)
                                                   .eps(options.eps()));
    if (residual.defined()) y = y + residual;
    return torch::relu(y);
  }

  /// `volt::nn::Name(C, eps=..., momentum=..., affine=..., track_running_stats=...)`.
  void print(std::ostream& stream, const char* name) const {
    stream << std::boolalpha << "volt::nn::" << name << "(" << options.num_features() << ", eps=" << options.eps()
           << ", momentum=";
    if (options.momentum()) {
      stream << *options.momentum();
    } else {
      stream << "None";
    }
    stream << ", affine=" << options.affine() << ", track_running_stats=" << options.track_running_stats() << ")";
  }
};

}  // namespace detail

/// `relu(batch_norm(x))` over (N, C, H, W), with BatchNorm2d's parameters, buffers and options; cuDNN's fused
/// kernel on CUDA for channels-last training inputs, LibTorch's separate ops elsewhere (volt/nn/batch_norm_relu.hpp).
class BatchNormReLU2dImpl : public detail::BatchNormActivationBase<BatchNormReLU2dImpl> {
 public:
  using detail::BatchNormActivationBase<BatchNormReLU2dImpl>::BatchNormActivationBase;

  /// relu(batch_norm(input)): batch statistics in training (updating the running ones), running ones in eval.
  torch::Tensor forward(const torch::Tensor& input) { return run(input, {}, "BatchNormReLU2d"); }

  /// `volt::nn::BatchNormReLU2d(64, eps=1e-05, momentum=0.1, affine=true, track_running_stats=true)`.
  void pretty_print(std::ostream& stream) const override { print(stream, "BatchNormReLU2d"); }
};

/// A ModuleHolder for BatchNormReLU2dImpl (as TORCH_MODULE makes for LibTorch's modules).
TORCH_MODULE(BatchNormReLU2d);

/// `relu(batch_norm(x) + residual)` over (N, C, H, W), the end of a residual block, with BatchNorm2d's
/// parameters, buffers and options; cuDNN's fused kernel on CUDA for channels-last training inputs (input and
/// residual of one shape, type and layout), LibTorch's separate ops elsewhere.
///
/// On CUDA the fused kernel adds before it rounds, where LibTorch rounds the batch norm's output to half or
/// bfloat16 first: where `batch_norm(x) + residual` lies within a rounding step of zero the two can fall on
/// different sides of the ReLU (measured: 0.04% of the elements in BF16, 0.006% in FP16;
/// benchmarks/results/fused-batchnorm-probe.md). In float32, and on the CPU, the results match.
class BatchNormAddReLU2dImpl : public detail::BatchNormActivationBase<BatchNormAddReLU2dImpl> {
 public:
  using detail::BatchNormActivationBase<BatchNormAddReLU2dImpl>::BatchNormActivationBase;

  /// relu(batch_norm(input) + residual); residual has input's shape.
  torch::Tensor forward(const torch::Tensor& input, const torch::Tensor& residual) {
    TORCH_CHECK(residual.defined(), "volt::nn::BatchNormAddReLU2d: the residual is an undefined tensor");
    return run(input, residual, "BatchNormAddReLU2d");
  }

  /// `volt::nn::BatchNormAddReLU2d(64, eps=1e-05, momentum=0.1, affine=true, track_running_stats=true)`.
  void pretty_print(std::ostream& stream) const override { print(stream, "BatchNormAddReLU2d"); }
};

/// A ModuleHolder for BatchNormAddReLU2dImpl.
TORCH_MODULE(BatchNormAddReLU2d);

}  // namespace volt::nn

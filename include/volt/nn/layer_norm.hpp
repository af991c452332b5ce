/// \file
/// volt::nn::LayerNorm: torch::nn::LayerNorm with one fused CUDA kernel forward and one backward.
///
/// LibTorch's layer norm runs, per call, a forward kernel and in the backward one kernel for the input's gradient
/// and another (with a reduction after it) for the weight's and bias's; under autocast its output is float32, so
/// the matmul after it launches one more kernel to cast it. On CUDA, volt::nn::LayerNorm runs one kernel forward
/// and one backward (plus a small sum of per-block partial gradients), compiled at run time for the row length and
/// the tensors' types (volt/nn/detail/layer_norm_kernels.hpp), with the input, output, weight and gradient types
/// free to differ; with `autocast_output` the output leaves the kernel in autocast's type.
///
/// Where the fused kernels do not apply (the CPU, MPS, a normalized size that is not a multiple of 4 or exceeds
/// 1024, a non-contiguous input, a build without CUDA, a driver or NVRTC that cannot be found), it runs exactly
/// `torch::nn::functional::layer_norm`, so results there equal torch::nn::LayerNorm's bit for bit. `fuses(x)` says
/// which path a call takes and `why_not_fused(x)` why.
///
/// It holds what torch::nn::LayerNorm holds, under the same names (`weight`, `bias`), made from the same options
/// (torch::nn::LayerNormOptions) and initialised alike (ones and zeros): state dicts and checkpoints move between
/// the two, and PyTorch's nn.LayerNorm, unchanged.
///
///   volt::nn::LayerNorm ln(torch::nn::LayerNormOptions({384}));
///   volt::nn::LayerNorm ln_before_matmul(torch::nn::LayerNormOptions({384}), /*autocast_output=*/true);
///   auto [stream, normalized] = ln_before_matmul->forward_add(stream, attention_output);  // h = x + r, then LN
#pragma once

#include <volt/core/compat.hpp>
#include <volt/nn/detail/layer_norm_kernels.hpp>

#include <torch/torch.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace volt::nn {

/// Layer normalization over the last dimensions (`normalized_shape`), as torch::nn::LayerNorm, fused on CUDA
/// (volt/nn/layer_norm.hpp).
class LayerNormImpl : public torch::nn::Cloneable<LayerNormImpl> {
 public:
  /// Over the last dimensions of sizes `normalized_shape`, with LayerNormOptions' defaults (eps 1e-5, affine).
  explicit LayerNormImpl(std::vector<std::int64_t> normalized_shape)
      : LayerNormImpl(torch::nn::LayerNormOptions(std::move(normalized_shape))) {}

  /// With torch::nn::LayerNorm's options. With `autocast_output`, a call under autocast (on the input's device
  /// type) returns autocast's type (bfloat16 or half) instead of float32: for a layer norm whose output only feeds
  /// matmuls, which would cast it to that type anyway, this is the same arithmetic with one cast kernel less
  /// forward and one backward. Without autocast the output has the input's type either way.
  explicit LayerNormImpl(torch::nn::LayerNormOptions options, bool autocast_output = false)
      : options(std::move(options)), autocast_output(autocast_output) {
    LayerNormImpl::reset();
  }

  /// Registers `weight` and `bias` (undefined without elementwise_affine) and initialises them.
  void reset() override {
    const auto& shape = options.normalized_shape();
    TORCH_CHECK(!shape.empty(), "volt::nn::LayerNorm: normalized_shape is empty; give the sizes of the last "
                                "dimensions to normalize over, e.g. {384}");
    for (const auto size : shape) {
      TORCH_CHECK(size > 0, "volt::nn::LayerNorm: normalized_shape ", torch::IntArrayRef(shape),
                  " has a size that is not positive");
    }
    if (options.elementwise_affine()) {
      weight = register_parameter("weight", torch::empty(shape));
      bias = register_parameter("bias", torch::empty(shape));
    } else {
      weight = register_parameter("weight", torch::Tensor(), /*requires_grad=*/false);
      bias = register_parameter("bias", torch::Tensor(), /*requires_grad=*/false);
    }
    reset_parameters();
  }

  /// Weight 1 and bias 0 (torch::nn::LayerNorm's reset_parameters).
  void reset_parameters() {
    if (!options.elementwise_affine()) return;
    torch::NoGradGuard no_grad;
    weight.fill_(1);
    bias.zero_();
  }

  /// Normalizes `input` over its last dimensions (they must equal normalized_shape).
  torch::Tensor forward(const torch::Tensor& input) {
    check(input);
    const auto output_type = output_type_for(input);
    const auto n = row_length();
    if (detail::layer_norm_unfusable(input, n, weight, bias, output_type).empty()) {
      return detail::fused_layer_norm(input, options.normalized_shape(), weight, bias, options.eps(), output_type);
    }
    auto y = torch::nn::functional::layer_norm(
        input, torch::nn::functional::LayerNormFuncOptions(options.normalized_shape())
                   .weight(weight)
                   .bias(bias)
                   .eps(options.eps()));
    // LibTorch's own op picks its output type (float32 under autocast); autocast_output then casts, as the
    // matmul after it would.
    if (autocast_output && autocast_on(input) && y.scalar_type() != output_type) y = y.to(output_type);
    return y;
  }

  /// The residual stream's step of a pre-norm transformer in one kernel each way: returns {h, layer_norm(h)} with
  /// h = input + residual (the promoted type of the two: float32 for a float32 stream and a bfloat16 branch under
  /// autocast). LibTorch runs the add, then the layer norm, which reads h again; backward, the add's gradient casts
  /// and the sum of h's two gradients are kernels of their own. Fused, the add happens as the row is loaded, and
  /// the backward adds the gradient h gets from its other uses and writes the input's and residual's gradients in
  /// their types. The same results as `h = input + residual; forward(h)`, which runs where the kernels do not
  /// apply (then bit for bit); `residual` must have input's shape to fuse.
  std::pair<torch::Tensor, torch::Tensor> forward_add(const torch::Tensor& input, const torch::Tensor& residual) {
    check(input);
    TORCH_CHECK(residual.defined(), "volt::nn::LayerNorm: forward_add's residual is an undefined tensor");
    if (why_not_fused_add(input, residual).empty()) {
      const auto h_type = c10::promoteTypes(input.scalar_type(), residual.scalar_type());
      return detail::fused_add_layer_norm(input, residual, options.normalized_shape(), weight, bias, options.eps(),
                                          output_type_for(input.device(), h_type));
    }
    auto h = input + residual;
    return {h, forward(h)};
  }

  /// Why forward_add(input, residual) would not run the fused kernels; empty when it would.
  std::string why_not_fused_add(const torch::Tensor& input, const torch::Tensor& residual) const {
    if (!shape_matches(input)) return "the input's last dimensions differ from normalized_shape";
    if (!residual.defined()) return "the residual is undefined";
    if (!input.is_floating_point() || !residual.is_floating_point()) return "the input and residual must be floating";
    const auto h_type = c10::promoteTypes(input.scalar_type(), residual.scalar_type());
    return detail::layer_norm_unfusable(input, row_length(), weight, bias, output_type_for(input.device(), h_type),
                                        residual);
  }

  /// Whether forward(input) would run the fused kernels.
  bool fuses(const torch::Tensor& input) const { return why_not_fused(input).empty(); }

  /// Why forward(input) would not run the fused kernels; empty when it would.
  std::string why_not_fused(const torch::Tensor& input) const {
    if (!shape_matches(input)) return "the input's last dimensions differ from normalized_shape";
    return detail::layer_norm_unfusable(input, row_length(), weight, bias, output_type_for(input));
  }

  /// `volt::nn::LayerNorm([384], eps=1e-05, elementwise_affine=true)` (with `, autocast_output=true` when set).
  void pretty_print(std::ostream& stream) const override {
    stream << std::boolalpha << "volt::nn::LayerNorm(" << torch::IntArrayRef(options.normalized_shape())
           << ", eps=" << options.eps() << ", elementwise_affine=" << options.elementwise_affine();
    if (autocast_output) stream << ", autocast_output=true";
    stream << ")";
  }

  /// The options the module was made with.
  torch::nn::LayerNormOptions options;
  /// Whether a call under autocast returns autocast's type (see the constructor).
  bool autocast_output = false;
  /// Scale, of normalized_shape (ones at first); undefined without elementwise_affine.
  torch::Tensor weight;
  /// Shift, of normalized_shape (zeros at first); undefined without elementwise_affine.
  torch::Tensor bias;

 private:
  std::int64_t row_length() const {
    std::int64_t n = 1;
    for (const auto size : options.normalized_shape()) n *= size;
    return n;
  }

  bool shape_matches(const torch::Tensor& input) const {
    const auto& shape = options.normalized_shape();
    const auto d = static_cast<std::int64_t>(shape.size());
    if (!input.defined() || input.dim() < d) return false;
    for (std::int64_t i = 0; i < d; ++i) {
      if (input.size(input.dim() - d + i) != shape[static_cast<std::size_t>(i)]) return false;
    }
    return true;
  }

  void check(const torch::Tensor& input) const {
    TORCH_CHECK(input.defined(), "volt::nn::LayerNorm: the input is an undefined tensor");
    TORCH_CHECK(shape_matches(input), "volt::nn::LayerNorm: given normalized_shape=",
                torch::IntArrayRef(options.normalized_shape()), ", expected an input whose last ",
                options.normalized_shape().size(), " dimension(s) are ",
                torch::IntArrayRef(options.normalized_shape()), ", but got an input of shape ", input.sizes());
  }

  /// float32 under autocast on the input's device type (autocast runs layer norm in float32), autocast's type
  /// there with autocast_output, else the input's type.
  c10::ScalarType output_type_for(const torch::Tensor& input) const {
    return output_type_for(input.device(), input.scalar_type());
  }

  /// The same for an input of `type` on `device`.
  c10::ScalarType output_type_for(const c10::Device& device, c10::ScalarType type) const {
    if (c10::isFloatingType(type) && autocast_on(device.type())) {
      return autocast_output ? volt::compat::autocast_dtype(device.type()) : torch::kFloat;
    }
    return type;
  }

  static bool autocast_on(c10::DeviceType device_type) {
    return volt::compat::autocast_available(device_type) && volt::compat::autocast_enabled(device_type);
  }

  static bool autocast_on(const torch::Tensor& input) {
    return input.is_floating_point() && autocast_on(input.device().type());
  }
};

/// A ModuleHolder for LayerNormImpl (as TORCH_MODULE makes for LibTorch's modules).
TORCH_MODULE(LayerNorm);

}  // namespace volt::nn

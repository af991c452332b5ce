/// \file
/// volt::nn::functional::cross_entropy and volt::nn::CrossEntropyLoss: LibTorch's cross-entropy with one fused
/// CUDA kernel forward and one backward.
///
/// LibTorch's cross_entropy over class indices is log_softmax then nll_loss: the forward writes the log-softmax of
/// every logit (float32 under autocast, twice the size of bfloat16 logits), and the backward fills a zero gradient of
/// that size, scatters into it, runs log_softmax's backward over both and casts the result back. For a language
/// model's output layer (16384 positions x 8192 classes in volt's GPT benchmark) that is ~2.7 GB of memory traffic
/// and ~1 GB of peak memory per step. On CUDA, volt's cross_entropy reads the logits once forward (writing one
/// float per row) and once backward (writing their gradient), compiled at run time for the class count and type
/// (volt/nn/detail/cross_entropy_kernels.hpp); arithmetic is float32 for every logit type, as LibTorch's.
///
/// Where the fused kernels do not apply (the CPU, MPS, logits not 2-D (rows, classes) or not contiguous, class
/// probabilities or non-int64 targets, class weights, a build without CUDA, a driver or NVRTC that cannot be found)
/// it runs exactly `torch::nn::functional::cross_entropy`, so results there equal LibTorch's bit for bit and errors
/// are LibTorch's. `cross_entropy_fuses` says which path a call takes and `cross_entropy_why_not_fused` why.
///
/// Types: the loss is float32 under autocast (on the logits' device type) and has the logits' type otherwise; the
/// logits' gradient has the logits' type; as LibTorch's. A target outside [0, classes) that is not ignore_index
/// gives a NaN loss (and NaN gradients) for its row; LibTorch's CUDA kernel stops the process with a device-side
/// assert there.
///
///   auto loss = volt::nn::functional::cross_entropy(logits.flatten(0, 1), targets.flatten());
///   volt::nn::CrossEntropyLoss criterion(torch::nn::CrossEntropyLossOptions().label_smoothing(0.1));
#pragma once

#include <volt/core/compat.hpp>
#include <volt/nn/detail/cross_entropy_kernels.hpp>

#include <torch/torch.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <utility>

namespace volt::nn {

namespace functional {

/// Why cross_entropy(input, target, options) would not run the fused kernels; empty when it would.
inline std::string cross_entropy_why_not_fused(const torch::Tensor& input, const torch::Tensor& target,
                                               const torch::nn::functional::CrossEntropyFuncOptions& options = {}) {
  return detail::cross_entropy_unfusable(input, target, options.weight().defined(), options.label_smoothing());
}

/// Whether cross_entropy(input, target, options) would run the fused kernels.
inline bool cross_entropy_fuses(const torch::Tensor& input, const torch::Tensor& target,
                                const torch::nn::functional::CrossEntropyFuncOptions& options = {}) {
  return cross_entropy_why_not_fused(input, target, options).empty();
}

/// The cross-entropy between logits `input` and class indices `target`, with torch::nn::functional::cross_entropy's
/// options (ignore_index, reduction, label_smoothing, weight) and results; fused on CUDA (volt/nn/cross_entropy.hpp).
inline torch::Tensor cross_entropy(const torch::Tensor& input, const torch::Tensor& target,
                                   const torch::nn::functional::CrossEntropyFuncOptions& options = {}) {
  if (!cross_entropy_fuses(input, target, options)) {
    return torch::nn::functional::cross_entropy(input, target, options);
  }
  const auto device_type = input.device().type();
  const bool autocast = volt::compat::autocast_available(device_type) && volt::compat::autocast_enabled(device_type);
  const auto output_type = autocast ? torch::kFloat : input.scalar_type();
  auto rows = detail::fused_cross_entropy_rows(input, target, options.ignore_index(), options.label_smoothing());
  torch::Tensor loss;
  switch (torch::enumtype::reduction_get_enum(options.reduction())) {
    case at::Reduction::None: loss = rows; break;
    case at::Reduction::Sum: loss = rows.sum(); break;
    default: loss = rows.sum() / target.ne(options.ignore_index()).sum().to(torch::kFloat); break;
  }
  return loss.scalar_type() == output_type ? loss : loss.to(output_type);
}

}  // namespace functional

/// The cross-entropy loss as a module, as torch::nn::CrossEntropyLoss (volt/nn/cross_entropy.hpp): the same options,
/// the class weights as the buffer `weight`; fused on CUDA.
class CrossEntropyLossImpl : public torch::nn::Cloneable<CrossEntropyLossImpl> {
 public:
  /// With torch::nn::CrossEntropyLoss's options (mean reduction, ignore_index -100, no smoothing by default).
  explicit CrossEntropyLossImpl(torch::nn::CrossEntropyLossOptions options = {}) : options(std::move(options)) {
    CrossEntropyLossImpl::reset();
  }

  /// Registers the class weights (undefined when none are given) as the buffer `weight`: the tensor given in the
  /// options, seen through a tensor of the module's own, so that clone() gives the copy weights of its own.
  void reset() override {
    weight = register_buffer("weight", options.weight().defined() ? options.weight().detach() : torch::Tensor());
  }

  /// The loss of logits `input` for class indices (or probabilities) `target`.
  torch::Tensor forward(const torch::Tensor& input, const torch::Tensor& target) {
    return functional::cross_entropy(input, target, call_options());
  }

  /// Whether forward(input, target) would run the fused kernels.
  bool fuses(const torch::Tensor& input, const torch::Tensor& target) const {
    return functional::cross_entropy_fuses(input, target, call_options());
  }

  /// Why forward(input, target) would not run the fused kernels; empty when it would.
  std::string why_not_fused(const torch::Tensor& input, const torch::Tensor& target) const {
    return functional::cross_entropy_why_not_fused(input, target, call_options());
  }

  /// `volt::nn::CrossEntropyLoss(ignore_index=-100, label_smoothing=0)`.
  void pretty_print(std::ostream& stream) const override {
    stream << "volt::nn::CrossEntropyLoss(ignore_index=" << options.ignore_index()
           << ", label_smoothing=" << options.label_smoothing() << ")";
  }

  /// The options the module was made with.
  torch::nn::CrossEntropyLossOptions options;
  /// The class weights, [classes]; undefined when none were given.
  torch::Tensor weight;

 private:
  // The options with the module's own weight buffer (moved with the module by to(device)).
  torch::nn::functional::CrossEntropyFuncOptions call_options() const {
    auto call = options;
    call.weight(weight);
    return call;
  }
};

/// A ModuleHolder for CrossEntropyLossImpl (as TORCH_MODULE makes for LibTorch's modules).
TORCH_MODULE(CrossEntropyLoss);

}  // namespace volt::nn

/// \file
/// The averaging that volt::WeightAveraging and volt::StochasticWeightAveraging share: the averaging functions
/// (torch.optim.swa_utils' get_swa_multi_avg_fn and get_ema_multi_avg_fn) and detail::AveragedWeights, an
/// averaged copy of a module's parameters and buffers (torch's AveragedModel without the module copy).
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/compat.hpp>
#include <volt/core/python_format.hpp>
#include <volt/serialization/detail/model_match.hpp>

#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace volt {

/// An averaging function (torch's multi_avg_fn): updates each `averaged[i]` in place from `current[i]` (on the
/// same device, of the same dtype: the lists hold the tensors of one dtype), where `num_averaged` (>= 1)
/// updates went into the average before this one. The first update copies and does not call it.
using AveragingFunction = std::function<void(const std::vector<torch::Tensor>& averaged,
                                             const std::vector<torch::Tensor>& current, std::int64_t num_averaged)>;

/// The equal average of every update (torch's get_swa_multi_avg_fn; the default of both averaging
/// callbacks): `averaged += (current - averaged) / (num_averaged + 1)`, as one multi-tensor lerp on CUDA and
/// per tensor elsewhere (torch's two paths); integer tensors get the value truncated, as in torch.
VOLT_INLINE AveragingFunction swa_average();

/// The exponential moving average (torch's get_ema_multi_avg_fn):
/// `averaged = decay * averaged + (1 - decay) * current`, as lerp for floating tensors. Throws
/// std::invalid_argument with torch's message for a decay outside [0, 1].
VOLT_INLINE AveragingFunction ema_average(double decay = 0.999);

namespace detail {

/// An averaged copy of a module's parameters and buffers, with the number of updates (torch's AveragedModel
/// over the module's tensors, in the order of parameters() and buffers()).
class AveragedWeights {
 public:
  /// Whether the copy exists (the fit's setup made it).
  bool ready() const noexcept { return ready_; }
  /// Updates so far.
  std::int64_t n_averaged() const noexcept { return n_averaged_; }
  /// The averaged parameters.
  const std::vector<torch::Tensor>& parameters() const noexcept { return parameters_; }
  /// The averaged (or followed) buffers.
  const std::vector<torch::Tensor>& buffers() const noexcept { return buffers_; }

  /// A fresh copy of `module`'s weights on `device`, with no update counted.
  void reset(torch::nn::Module& module, torch::Device device);

  /// Takes copies of `module`'s weights (on its device) as an average of `n_averaged` updates: a checkpoint's
  /// averaged weights, loaded into the module from its model entry. adopt() then puts them to use.
  void take(torch::nn::Module& module, std::int64_t n_averaged);

  /// Uses the tensors load() or take() read, on `device`, after checking them against `module`. Throws CheckpointError
  /// naming `owner` when their number, shapes or dtypes differ from the module's.
  void adopt(torch::nn::Module& module, torch::Device device, const std::string& owner);

  /// torch's AveragedModel.update_parameters: the first update copies `module`'s weights, later ones apply
  /// `average` to the parameters (and buffers with `use_buffers`; otherwise the buffers are copied).
  void update(torch::nn::Module& module, const AveragingFunction& average, bool use_buffers);

  /// Exchanges the averaged parameters and buffers with `module`'s (in place: the module's tensors keep their
  /// storage), as Lightning's WeightAveraging swaps them around validation.
  void swap(torch::nn::Module& module);

  /// Copies the averaged parameters (and buffers, `with_buffers`) into `module`.
  void copy_into(torch::nn::Module& module, bool with_buffers) const;

  /// Writes the tensors and n_averaged ("ready" false and nothing else before the fit's setup).
  void save(torch::serialize::OutputArchive& archive) const;

  /// Reads what save() wrote; returns whether it held a copy (adopt() then puts it to use).
  bool load(torch::serialize::InputArchive& archive);

 private:
  static std::vector<torch::Tensor> copies(const std::vector<torch::Tensor>& tensors, torch::Device device);

  static std::vector<torch::Tensor> read_tensors(torch::serialize::InputArchive& archive, const std::string& prefix);

  static void check_count(std::size_t mine, std::size_t theirs);

  static void check_matches(const std::vector<torch::Tensor>& saved, const std::vector<torch::Tensor>& model,
                            const std::string& owner, const std::string& kind);

  void copy_buffers_from(torch::nn::Module& module);

  static void copy_all(const std::vector<torch::Tensor>& destinations, const std::vector<torch::Tensor>& sources);

  std::vector<torch::Tensor> parameters_{};
  std::vector<torch::Tensor> buffers_{};
  std::int64_t n_averaged_ = 0;
  bool ready_ = false;
};

}  // namespace detail
}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/callbacks/detail/impl/averaged_weights.ipp>
#endif

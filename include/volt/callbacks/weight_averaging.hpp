/// \file
/// volt::WeightAveraging and volt::EMAWeightAveraging: an averaged copy of the model's weights, updated after
/// optimizer steps, used for validation and put into the model when training ends (Lightning 2.6's
/// WeightAveraging and EMAWeightAveraging over torch.optim.swa_utils.AveragedModel).
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/callbacks/detail/averaged_weights.hpp>
#include <volt/core/errors.hpp>
#include <volt/core/log.hpp>
#include <volt/serialization/checkpoint_hooks.hpp>

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace volt {

/// The options of volt::WeightAveraging.
struct WeightAveragingOptions {
  /// Where the averaged copy lives; nullopt: the model's device (Lightning's default). `torch::kCPU` keeps
  /// it out of GPU memory, at the cost of a copy to the host at every update.
  std::optional<torch::Device> device{};
  /// Average the buffers (BatchNorm's running statistics) too; false: the copy's buffers follow the model's
  /// at each update (torch's AveragedModel use_buffers; Lightning's default true).
  bool use_buffers = true;
  /// The averaging function (volt::swa_average(), volt::ema_average(decay), or one of your own); empty: the
  /// equal average of every update, swa_average().
  AveragingFunction avg_fn{};
  /// When to update, asked after every optimizer step with the step's 0-based index (`step_idx`, epoch_idx
  /// nullopt) and after every training epoch with the epoch's index (`epoch_idx`, step_idx nullopt);
  /// Lightning's should_update. Empty: after every optimizer step and never at an epoch's end.
  std::function<bool(std::optional<std::int64_t> step_idx, std::optional<std::int64_t> epoch_idx)> should_update{};
};

/// Callback: keeps an averaged copy of the model's parameters (and buffers with use_buffers), updated when
/// should_update says (after every optimizer step by default), by avg_fn: the first update copies the
/// weights, each later one averages them in (Lightning's WeightAveraging, torch's AveragedModel).
///
/// * Validation inside fit (and the sanity check) runs with the averaged weights: they are swapped into the
///   model at on_validation_epoch_start and swapped back at on_validation_epoch_end.
/// * When training ends (on_train_end, as Lightning), the averaged weights are copied into the model: after
///   fit() the model holds them.
/// * Checkpoints hold the averaged weights as their model entry (Lightning's state_dict), the model's own
///   weights beside them under "current_model_state", the number of updates under "averaging_state", and
///   the last updated step and epoch as the callback's state (Lightning 2.6's on_save_checkpoint). A fit
///   resumed from one puts "current_model_state" back into the model and the model entry into the average
///   (on_load_checkpoint), so it continues exactly as an uninterrupted fit; a checkpoint of a fit without this
///   callback starts the average from its weights, with Lightning's warning. Loading a checkpoint's weights
///   for inference (volt::load_checkpoint_weights) gives the averaged model. A weights-only checkpoint
///   (save_weights_only) holds the model's own weights, as in Lightning, and a checkpoint written after fit()
///   holds the averaged weights twice (the model has them by then).
///
/// Works with automatic and manual optimization, under DDP (every rank averages its identical weights) and
/// with TrainerOptions::cuda_graphs (the update runs eagerly after each replay of the captured step; the
/// swaps copy in place, so the graph's tensors stay where they are).
class WeightAveraging {
 public:
  /// Takes the options (nothing to check: every value is valid).
  explicit WeightAveraging(WeightAveragingOptions options = {});

  /// When fit begins: the averaged copy of the model (or, on resume, the checkpoint's), on the device.
  template <class State>
  void setup(State& state) {
    if (state.stage != State::Stage::fitting || state.model == nullptr) return;
    const torch::Device device = options_.device.value_or(state.root_device);
    if (restored_) {
      average_.adopt(*state.model, device, "WeightAveraging");
    } else {
      average_.reset(*state.model, device);
    }
    if (!counters_restored_) {
      latest_update_step_ = 0;
      latest_update_epoch_ = -1;
    }
    restored_ = false;
    counters_restored_ = false;
  }

  /// After each training batch: updates the average when an optimizer step was taken since the last update
  /// and should_update(step_idx = global_step - 1) agrees.
  template <class State>
  void on_train_batch_end(State& state, const torch::Tensor& /*loss*/, std::int64_t /*batch_idx*/) {
    if (!average_.ready() || state.global_step <= latest_update_step_) return;
    if (!wants_update(state.global_step - 1, std::nullopt)) return;
    average_.update(*state.model, options_.avg_fn, options_.use_buffers);
    latest_update_step_ = state.global_step;
  }

  /// After each training epoch: updates the average when should_update(epoch_idx = current_epoch) agrees.
  template <class State>
  void on_train_epoch_end(State& state) {
    if (!average_.ready() || state.current_epoch <= latest_update_epoch_) return;
    if (!wants_update(std::nullopt, state.current_epoch)) return;
    average_.update(*state.model, options_.avg_fn, options_.use_buffers);
    latest_update_epoch_ = state.current_epoch;
  }

  /// Validation runs with the averaged weights (swapped in here, out at on_validation_epoch_end).
  template <class State>
  void on_validation_epoch_start(State& state) {
    if (in_fit(state)) average_.swap(*state.model);
  }
  /// Puts the model's own weights back after validation.
  template <class State>
  void on_validation_epoch_end(State& state) {
    if (in_fit(state)) average_.swap(*state.model);
  }

  /// When training ends: the model gets the averaged parameters and buffers.
  template <class State>
  void on_train_end(State& state) {
    if (average_.ready() && state.model != nullptr) average_.copy_into(*state.model, /*with_buffers=*/true);
  }

  /// A full checkpoint being written (global rank zero): its model entry becomes the averaged weights, the
  /// model's own weights go under "current_model_state" and the number of updates under "averaging_state".
  /// Before the fit's setup made the average it only logs Lightning's message and changes nothing.
  void on_save_checkpoint(CheckpointSave& checkpoint);
  /// Resuming from a checkpoint: with "current_model_state" and "averaging_state", the model entry (loaded into
  /// the model) becomes the average and the model gets "current_model_state"; otherwise Lightning's warning, and
  /// the fit's setup starts the average from the model. Throws CheckpointError when the entry does not match
  /// the model.
  void on_load_checkpoint(CheckpointLoad& checkpoint);
  /// Writes the last updated step and epoch (Lightning's state_dict holds the step).
  void save_state(torch::serialize::OutputArchive& archive) const;
  /// Reads what save_state wrote.
  void load_state(torch::serialize::InputArchive& archive);

  /// How many times the average was updated (torch's n_averaged).
  std::int64_t n_averaged() const noexcept { return average_.n_averaged(); }
  /// The averaged parameters, in the order of the model's parameters() (empty before fit).
  const std::vector<torch::Tensor>& averaged_parameters() const noexcept { return average_.parameters(); }
  /// The averaged (or followed) buffers, in the order of the model's buffers().
  const std::vector<torch::Tensor>& averaged_buffers() const noexcept { return average_.buffers(); }

 private:
  // Validation inside fit and its sanity check (after fit the model already holds the averaged weights).
  template <class State>
  bool in_fit(const State& state) const {
    return average_.ready() && state.model != nullptr &&
           (state.stage == State::Stage::fitting || state.stage == State::Stage::sanity_checking);
  }

  bool wants_update(std::optional<std::int64_t> step_idx, std::optional<std::int64_t> epoch_idx) const;

  WeightAveragingOptions options_;
  detail::AveragedWeights average_{};
  std::int64_t latest_update_step_ = 0;
  std::int64_t latest_update_epoch_ = -1;
  bool restored_ = false;           // on_load_checkpoint took the checkpoint's average
  bool counters_restored_ = false;  // load_state read the last updated step and epoch
};

/// The options of volt::EMAWeightAveraging (Lightning's EMAWeightAveraging arguments).
struct EMAWeightAveragingOptions {
  /// Where the averaged copy lives; nullopt: the model's device.
  std::optional<torch::Device> device{};
  /// Average the buffers too (see WeightAveragingOptions::use_buffers).
  bool use_buffers = true;
  /// The weight of the old average at each update, in [0, 1].
  double decay = 0.999;
  /// Update after every n-th optimizer step (step indices 0, n, 2n, ...); 0: never after a step.
  std::int64_t update_every_n_steps = 1;
  /// Update after steps from this 0-based index on; nullopt: from the first.
  std::optional<std::int64_t> update_starting_at_step{};
  /// Also update at the end of every epoch from this 0-based index on; nullopt: never at an epoch's end.
  std::optional<std::int64_t> update_starting_at_epoch{};
};

/// Callback: WeightAveraging with an exponential moving average,
/// `average = decay * average + (1 - decay) * weights` at each update (Lightning's EMAWeightAveraging, torch's get_ema_multi_avg_fn), after every
/// update_every_n_steps-th step from update_starting_at_step, and at epoch ends from update_starting_at_epoch.
class EMAWeightAveraging : public WeightAveraging {
 public:
  /// Throws std::invalid_argument (torch's message) for a decay outside [0, 1], MisconfigurationError for a
  /// negative update_every_n_steps.
  explicit EMAWeightAveraging(EMAWeightAveragingOptions options = {})
      : WeightAveraging(weight_averaging_options(options)) {}

 private:
  static WeightAveragingOptions weight_averaging_options(const EMAWeightAveragingOptions& ema);
};

}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/callbacks/impl/weight_averaging.ipp>
#endif

/// \file
/// volt::StochasticWeightAveraging: Lightning 2.6's StochasticWeightAveraging callback (Izmailov et al., 2018):
/// from swa_epoch_start the learning rate follows torch's SWALR and the weights are averaged once per epoch;
/// when training ends the model gets the average and its BatchNorm statistics are recomputed.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/callbacks/detail/averaged_weights.hpp>
#include <volt/core/errors.hpp>
#include <volt/core/log.hpp>
#include <volt/core/python_format.hpp>
#include <volt/optim/swalr.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <typeinfo>
#include <utility>
#include <variant>
#include <vector>

namespace volt {

/// The epoch SWA starts at: an epoch number (int, >= 1: the n-th epoch) or a fraction of max_epochs (double
/// in [0, 1]: epoch int(f * max_epochs)), as Lightning's swa_epoch_start.
class SwaEpochStart {
 public:
  /// A fraction of max_epochs.
  constexpr SwaEpochStart(double fraction) : value_(fraction) {}  // NOLINT(google-explicit-constructor)
  /// The n-th epoch (1-based, as Lightning counts it here).
  constexpr SwaEpochStart(int epoch) : value_(static_cast<std::int64_t>(epoch)) {}  // NOLINT
  /// The n-th epoch (1-based).
  constexpr SwaEpochStart(std::int64_t epoch) : value_(epoch) {}  // NOLINT
  /// Deleted, so that `true` is not taken as epoch 1.
  SwaEpochStart(bool) = delete;

  /// Whether this is a fraction of max_epochs.
  constexpr bool is_fraction() const { return std::holds_alternative<double>(value_); }
  /// The fraction (is_fraction()).
  constexpr double fraction() const { return std::get<double>(value_); }
  /// The epoch number (!is_fraction()).
  constexpr std::int64_t epoch() const { return std::get<std::int64_t>(value_); }

 private:
  std::variant<double, std::int64_t> value_;
};

/// The options of volt::StochasticWeightAveraging (Lightning's arguments, with its defaults).
struct StochasticWeightAveragingOptions {
  /// The SWA learning rate: one value for every param group of the optimizer, or one per group. Required;
  /// each must be > 0.
  std::vector<double> swa_lrs{};
  /// When averaging starts: the n-th epoch (int >= 1) or a fraction of max_epochs (double in [0, 1]).
  SwaEpochStart swa_epoch_start = 0.8;
  /// Epochs over which SWALR anneals the rate to swa_lrs (>= 0).
  std::int64_t annealing_epochs = 10;
  /// How SWALR anneals: "cos" or "linear".
  std::string annealing_strategy = "cos";
  /// The averaging function (see volt::AveragingFunction); empty: the equal average, swa_average().
  AveragingFunction avg_fn{};
  /// Where the averaged weights live; nullopt: the model's device. Lightning's default: the CPU.
  std::optional<torch::Device> device = torch::Device(torch::kCPU);
};

/// Callback: Stochastic Weight Averaging as Lightning's StochasticWeightAveraging does it.
///
/// * swa_start: epoch `swa_epoch_start - 1` (0-based; `int(swa_epoch_start * max_epochs) - 1` for a fraction,
///   at least 0). From there to the last epoch: at the start of each epoch the model's parameters (as the
///   previous epoch left them) are averaged in, and torch's SWALR (volt::optim::SWALR) replaces the
///   optimizer's LR scheduler, stepped at each epoch's end (Lightning's order, with its messages: "Swapping
///   scheduler `StepLR` for `SWALR`", and a warning for a scheduler that did not step once per epoch).
/// * When training reaches max_epochs (or always with max_epochs = -1), the model gets the averaged
///   parameters; with a BatchNorm layer (torch::nn::BatchNorm1d/2d/3d) the running statistics are then reset
///   and recomputed with one pass of training_step over the training data, in training mode, without
///   gradients, with the cumulative average (momentum none) as torch's update_bn does. Training stopped early
///   (early stopping, max_steps before the last epoch) leaves the model as it is, as in Lightning.
/// * Checkpoints keep the averaged parameters, n_averaged, the last averaged epoch and SWALR's base rates:
///   a resumed fit continues the average and the schedule exactly.
///
/// Refused (MisconfigurationError, Lightning's messages): several optimizers, several LR schedulers, a
/// fractional swa_epoch_start with max_epochs = -1; and (volt) manual optimization, where the Trainer does
/// not step schedulers and training_step steps the optimizers itself.
/// With TrainerOptions::cuda_graphs the averaging and the BatchNorm pass run eagerly outside the captured
/// step, and SWALR's rates reach the captured optimizer as any scheduler's do.
class StochasticWeightAveraging {
 public:
  /// Checks the options. Throws MisconfigurationError with Lightning's messages for swa_lrs empty or not
  /// positive and for swa_epoch_start out of range, std::invalid_argument with torch's messages for
  /// annealing_strategy and annealing_epochs.
  explicit StochasticWeightAveraging(StochasticWeightAveragingOptions options);

  /// Fit start: Lightning's checks, swa_start from swa_epoch_start and max_epochs, whether the model has
  /// BatchNorm layers. A fit that does not resume from a checkpoint of this callback starts a new average.
  template <class State>
  void on_fit_start(State& state) {
    if (state.optimizers.size() != 1) throw MisconfigurationError("SWA currently works with 1 `optimizer`.");
    auto& optimization = *state.optimization_;
    if (!optimization.automatic()) {
      throw MisconfigurationError(
          "StochasticWeightAveraging needs automatic optimization: with `automatic_optimization = false` the "
          "model steps its optimizer and schedulers itself, so the Trainer can neither swap in SWALR nor run "
          "the BatchNorm pass (training_step would step the optimizer). Average the weights with "
          "volt::WeightAveraging instead.");
    }
    if (optimization.schedulers().size() > 1) {
      throw MisconfigurationError("SWA currently not supported for more than 1 `lr_scheduler`.");
    }
    max_epochs_ = state.max_epochs.value_or(-1);
    const auto& start = options_.swa_epoch_start;
    if (start.is_fraction() && max_epochs_ == -1) {
      throw MisconfigurationError("SWA with `swa_epoch_start` as a float is not supported when `max_epochs=-1`. "
                                  "Please provide `swa_epoch_start` as an integer.");
    }
    const std::int64_t epoch =
        start.is_fraction() ? static_cast<std::int64_t>(static_cast<double>(max_epochs_) * start.fraction()) : start.epoch();
    swa_start_ = std::max<std::int64_t>(epoch - 1, 0);
    has_batch_norm_ = false;
    for (const auto& module : state.model->modules()) has_batch_norm_ = has_batch_norm_ || is_batch_norm(*module);
    if (pending_parameters_) {
      average_.adopt(*state.model, options_.device.value_or(state.root_device), "StochasticWeightAveraging");
      pending_parameters_ = false;
    }
    if (!restored_) {
      average_ = {};
      latest_update_epoch_ = -1;
      swalr_base_lrs_.clear();
      swalr_start_epoch_ = -1;
    }
    restored_ = false;
    initialized_ = false;
    // A resume inside the SWA epochs: SWALR at once, since LibTorch's optimizer checkpoint does not hold the
    // learning rates (the epoch may be resumed in its middle, where on_train_epoch_start does not run).
    if (!swalr_base_lrs_.empty() && in_swa_epochs(state.current_epoch)) {
      initialized_ = true;
      install_swalr(state, state.current_epoch);
    }
  }

  /// Each training epoch's start in [swa_start, last epoch]: the first one installs SWALR; each averages the
  /// model's parameters in.
  template <class State>
  void on_train_epoch_start(State& state) {
    const std::int64_t epoch = state.current_epoch;
    if (!in_swa_epochs(epoch)) return;
    if (!initialized_) {
      initialized_ = true;
      install_swalr(state, epoch);
    }
    if (epoch > latest_update_epoch_) {
      if (!average_.ready()) average_.reset(*state.model, options_.device.value_or(state.root_device));
      average_.update(*state.model, options_.avg_fn, /*use_buffers=*/false);
      latest_update_epoch_ = epoch;
    }
  }

  /// Training's end: when the last epoch was trained (or max_epochs is -1), the averaged parameters go into
  /// the model and the BatchNorm statistics are recomputed.
  template <class State>
  void on_train_end(State& state) {
    const bool reached_end = max_epochs_ == -1 || state.current_epoch - 1 == max_epochs_ - 1;
    if (!reached_end || !average_.ready() || average_.n_averaged() == 0) return;
    average_.copy_into(*state.model, /*with_buffers=*/false);
    if (has_batch_norm_) update_batch_norm(state);
  }

  /// Writes n_averaged, the averaged parameters, the last averaged epoch and SWALR's base rates and start.
  void save_state(torch::serialize::OutputArchive& archive) const;
  /// Reads what save_state wrote (the fit that resumes continues from it).
  void load_state(torch::serialize::InputArchive& archive);

  /// How many times the parameters were averaged (torch's n_averaged).
  std::int64_t n_averaged() const noexcept { return average_.n_averaged(); }
  /// The 0-based epoch averaging starts at (known from on_fit_start on).
  std::int64_t swa_start() const noexcept { return swa_start_; }
  /// The averaged parameters, in the order of the model's parameters() (empty before the first average).
  const std::vector<torch::Tensor>& averaged_parameters() const noexcept { return average_.parameters(); }

 private:
  bool in_swa_epochs(std::int64_t epoch) const { return epoch >= swa_start_ && (max_epochs_ == -1 || epoch <= max_epochs_ - 1); }

  static bool is_batch_norm(torch::nn::Module& module);

  template <class State>
  void install_swalr(State& state, std::int64_t epoch) {
    auto swalr = std::make_shared<optim::SWALR>(*state.optimizers.front(), options_.swa_lrs, options_.annealing_epochs,
                                                options_.annealing_strategy);
    if (!swalr_base_lrs_.empty()) {
      swalr->resume(swalr_base_lrs_, epoch - swalr_start_epoch_);
    } else {
      swalr_base_lrs_ = swalr->base_lrs();
      swalr_start_epoch_ = epoch;
      if (epoch != swa_start_) {
        log::warn_rank_zero("SWA is initializing after swa_start without any checkpoint data (a checkpoint written "
                            "without StochasticWeightAveraging?). The average starts here.");
      }
    }
    auto& schedulers = state.optimization_->schedulers();
    if (!schedulers.empty()) {
      const auto& slot = schedulers.front();
      const std::string name = class_name(*slot.scheduler);
      if (slot.interval != decltype(slot.interval)::epoch || slot.frequency != 1) {
        log::warn_rank_zero("SWA is currently only supported every epoch. Found LRSchedulerConfig(scheduler=" + name +
                            ", interval='" + (slot.interval == decltype(slot.interval)::epoch ? "epoch" : "step") +
                            "', frequency=" + std::to_string(slot.frequency) + ")");
      }
      log::info_rank_zero("Swapping scheduler `" + name + "` for `SWALR`");
    }
    state.optimization_->replace_schedulers(std::move(swalr));
  }

  /// torch's update_bn on the model, with training_step's forward pass over the training data.
  template <class State>
  void update_batch_norm(State& state) {
    struct Saved {
      torch::nn::BatchNormOptions* options;
      c10::optional<double> momentum;
    };
    if (!state.forward_training_epoch) {
      log::warn_rank_zero("StochasticWeightAveraging: the Trainer offers no pass over the training data here, so "
                          "the BatchNorm statistics were not recomputed for the averaged weights.");
      return;
    }
    std::vector<Saved> momenta;
    auto reset = [&momenta](auto* norm) {
      if (norm == nullptr || !norm->options.track_running_stats() || !norm->running_mean.defined()) return;
      norm->reset_running_stats();
      momenta.push_back({&norm->options, norm->options.momentum()});
      norm->options.momentum({});
    };
    for (const auto& module : state.model->modules()) {
      reset(dynamic_cast<torch::nn::BatchNorm1dImpl*>(module.get()));
      reset(dynamic_cast<torch::nn::BatchNorm2dImpl*>(module.get()));
      reset(dynamic_cast<torch::nn::BatchNorm3dImpl*>(module.get()));
    }
    if (momenta.empty()) return;
    struct Restore {
      std::vector<Saved>& momenta;
      ~Restore() {
        for (auto& saved : momenta) saved.options->momentum(saved.momentum);
      }
    } restore{momenta};
    state.forward_training_epoch();
  }

  static std::string class_name(const torch::optim::LRScheduler& scheduler);

  StochasticWeightAveragingOptions options_;
  detail::AveragedWeights average_{};
  std::int64_t max_epochs_ = -1;
  std::int64_t swa_start_ = 0;
  std::int64_t latest_update_epoch_ = -1;
  std::vector<double> swalr_base_lrs_{};
  std::int64_t swalr_start_epoch_ = -1;
  bool has_batch_norm_ = false;
  bool initialized_ = false;
  bool restored_ = false;
  bool pending_parameters_ = false;
};

}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/callbacks/impl/stochastic_weight_averaging.ipp>
#endif

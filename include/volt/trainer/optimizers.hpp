/// \file
/// The optimizers of a fit and their LR schedulers (Lightning's core/optimizer.py: what configure_optimizers
/// returned, its checks, and when each scheduler steps).
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/errors.hpp>
#include <volt/core/log.hpp>
#include <volt/optim/plateau.hpp>
#include <volt/trainer/module.hpp>
#include <volt/trainer/state.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace volt::detail {

/// Lightning's refusal of several optimizers under automatic optimization (core/optimizer.py).
inline constexpr const char* several_optimizers_message =
    "Training with multiple optimizers is only supported with manual optimization. Set "
    "`self.automatic_optimization = False`, then access your optimizers in `training_step` with "
    "`opt1, opt2, ... = self.optimizers()`.";

/// Which schedulers a step_schedulers call steps. Lightning steps the step-interval ones other than
/// ReduceLROnPlateau right after the optimizer step, and the ReduceLROnPlateau ones after the validation that
/// may log their metric.
enum class SchedulerKinds {
  all,          ///< every scheduler of the interval
  non_plateau,  ///< all but the ReduceLROnPlateau ones
  plateau,      ///< only the ReduceLROnPlateau ones
};

/// An LR scheduler with its interval and frequency, the optimizer it belongs to, and how far it has come.
struct SchedulerSlot {
  std::shared_ptr<torch::optim::LRScheduler> scheduler;
  SchedulerInterval interval;
  std::int64_t frequency;
  std::int64_t steps = 0;      ///< scheduler.step() calls, saved in checkpoints
  std::size_t optimizer = 0;   ///< index of its optimizer in configure_optimizers' order
  std::string name{};          ///< LRSchedulerConfig::name
  std::string monitor{};       ///< LRSchedulerConfig::monitor
  bool strict = true;          ///< LRSchedulerConfig::strict
  /// The scheduler as a ReduceLROnPlateau (it steps with the monitored metric), else nullptr.
  optim::ReduceLROnPlateau* plateau = nullptr;
  /// The scheduler as a volt::optim::Scheduler whose state checkpoints save (has_state()), else nullptr.
  optim::Scheduler* stateful = nullptr;
};

/// The optimizers and schedulers of the running fit.
class Optimization {
 public:
  /// Takes what configure_optimizers() returned (once per fit). `automatic`: the model's
  /// automatic_optimization; with it only one optimizer is allowed (std::runtime_error with Lightning's
  /// message), without it the schedulers are the model's to step. Throws c10::Error for a null scheduler or a
  /// frequency below 1.
  void configure(std::vector<OptimizerConfig> configs, bool automatic = true, TrainerState* state = nullptr);

  /// The first optimizer (configure() must have run): the one automatic optimization steps.
  torch::optim::Optimizer& optimizer() const { return *configs_.front().optimizer; }
  /// The optimizers in configure_optimizers' order, as TrainerState lists them.
  std::vector<torch::optim::Optimizer*> optimizers() const;
  /// The schedulers in the order configure_optimizers gave them.
  std::vector<SchedulerSlot>& schedulers() { return schedulers_; }
  /// Whether the Trainer steps the optimizers and schedulers (automatic optimization).
  bool automatic() const { return automatic_; }

  /// Replaces the schedulers by `scheduler`, stepped at every epoch's end, for the rest of the fit (what
  /// Lightning's StochasticWeightAveraging does to trainer.lr_scheduler_configs). Checkpoints written from then
  /// on record it, and a resume from them leaves the schedule to the callback that set it (Lightning's
  /// _clear_schedulers).
  void replace_schedulers(std::shared_ptr<torch::optim::LRScheduler> scheduler);
  /// Whether a callback replaced the schedulers (replace_schedulers) in this fit or in the checkpoint it
  /// resumed from.
  bool schedulers_replaced() const { return replaced_by_callback_; }
  /// On resume from a checkpoint whose schedulers a callback had replaced: no scheduler until the callback
  /// installs its own again.
  void clear_replaced_schedulers();

  /// Training batches that ran a step so far in this fit (Lightning's _batches_that_stepped: the step value
  /// the loggers get under manual optimization).
  std::int64_t batches_stepped = 0;

  /// Steps the schedulers of `interval` and `kinds` whose frequency divides `index`, Lightning's count for the
  /// interval (_update_learning_rates): the epoch's batch index + 1 for `step` (after a batch that ends an
  /// accumulation window), the epoch + 1 for `epoch`. A ReduceLROnPlateau steps with its monitored metric
  /// (MisconfigurationError with Lightning's message when it was not logged and strict is set; a warning and no
  /// step otherwise), unless `with_metrics` is false (a resume's replay: their state comes from the
  /// checkpoint). Nothing under manual optimization: the model steps its schedulers.
  void step_schedulers(SchedulerInterval interval, std::int64_t index, SchedulerKinds kinds = SchedulerKinds::all,
                       bool with_metrics = true);

 private:
  void add(std::size_t optimizer, const LRSchedulerConfig& config, bool dict_form);

  std::vector<OptimizerConfig> configs_{};
  std::vector<SchedulerSlot> schedulers_{};
  bool automatic_ = true;
  bool replaced_by_callback_ = false;
  TrainerState* state_ = nullptr;
};

}  // namespace volt::detail

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/trainer/impl/optimizers.ipp>
#endif

/// \file
/// The optimizers of a fit and their LR schedulers (Lightning's core/optimizer.py: what configure_optimizers
/// returned, its checks, and when each scheduler steps).
#pragma once

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

/// An LR scheduler with its interval and frequency, the optimizer it belongs to, and how far it has come.
struct SchedulerSlot {
  std::shared_ptr<torch::optim::LRScheduler> scheduler;
  SchedulerInterval interval;
  std::int64_t frequency;
  std::int64_t intervals = 0;  ///< intervals seen (steps or epochs)
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
  void configure(std::vector<OptimizerConfig> configs, bool automatic = true, TrainerState* state = nullptr) {
    state_ = state;
    if (automatic && configs.size() > 1) throw std::runtime_error(several_optimizers_message);
    configs_ = std::move(configs);
    automatic_ = automatic;
    batches_stepped = 0;
    schedulers_.clear();
    replaced_by_callback_ = false;
    for (std::size_t i = 0; i < configs_.size(); ++i) {
      const auto& config = configs_[i];
      if (config.lr_scheduler) {
        add(i, {config.lr_scheduler, config.interval, config.frequency, {}, config.monitor}, /*dict_form=*/false);
      }
      for (const auto& extra : config.lr_schedulers) {
        TORCH_CHECK(extra.scheduler != nullptr, "volt: configure_optimizers() gave an LRSchedulerConfig without a scheduler",
                    extra.name.empty() ? std::string() : " (name \"" + extra.name + "\")");
        add(i, extra, /*dict_form=*/true);
      }
    }
  }

  /// The first optimizer (configure() must have run): the one automatic optimization steps.
  torch::optim::Optimizer& optimizer() const { return *configs_.front().optimizer; }
  /// The optimizers in configure_optimizers' order, as TrainerState lists them.
  std::vector<torch::optim::Optimizer*> optimizers() const {
    std::vector<torch::optim::Optimizer*> result;
    for (const auto& config : configs_) result.push_back(config.optimizer.get());
    return result;
  }
  /// The schedulers in the order configure_optimizers gave them.
  std::vector<SchedulerSlot>& schedulers() { return schedulers_; }
  /// Whether the Trainer steps the optimizers and schedulers (automatic optimization).
  bool automatic() const { return automatic_; }

  /// Replaces the schedulers by `scheduler`, stepped at every epoch's end, for the rest of the fit (what
  /// Lightning's StochasticWeightAveraging does to trainer.lr_scheduler_configs). Checkpoints written from then
  /// on record it, and a resume from them leaves the schedule to the callback that set it (Lightning's
  /// _clear_schedulers).
  void replace_schedulers(std::shared_ptr<torch::optim::LRScheduler> scheduler) {
    schedulers_.clear();
    schedulers_.push_back({std::move(scheduler), SchedulerInterval::epoch, 1});
    replaced_by_callback_ = true;
  }
  /// Whether a callback replaced the schedulers (replace_schedulers) in this fit or in the checkpoint it
  /// resumed from.
  bool schedulers_replaced() const { return replaced_by_callback_; }
  /// On resume from a checkpoint whose schedulers a callback had replaced: no scheduler until the callback
  /// installs its own again.
  void clear_replaced_schedulers() {
    schedulers_.clear();
    replaced_by_callback_ = true;
  }

  /// Training batches that ran a step so far in this fit (Lightning's _batches_that_stepped: the step value
  /// the loggers get under manual optimization).
  std::int64_t batches_stepped = 0;

  /// Steps the schedulers of `interval` whose frequency has come round (after an optimizer step, or at an
  /// epoch's end); a ReduceLROnPlateau with its monitored metric (MisconfigurationError with Lightning's message
  /// when it was not logged and strict is set; a warning and no step otherwise), unless `with_metrics` is false
  /// (a resume's replay: their state comes from the checkpoint). Nothing under manual optimization: the model
  /// steps its schedulers.
  void step_schedulers(SchedulerInterval interval, bool with_metrics = true) {
    if (!automatic_) return;
    for (auto& slot : schedulers_) {
      if (slot.interval != interval) continue;
      if (++slot.intervals % slot.frequency != 0) continue;
      if (slot.plateau == nullptr) {
        slot.scheduler->step();
        ++slot.steps;
        continue;
      }
      if (!with_metrics) continue;
      const auto value = state_ != nullptr ? state_->metric(slot.monitor) : std::nullopt;
      if (!value) {
        if (slot.strict) {
          std::string available = "[";
          if (state_ != nullptr) {
            for (const auto& [key, metric] : state_->callback_metrics()) {
              available += (available.size() > 1 ? ", '" : "'") + key + "'";
            }
          }
          throw MisconfigurationError("ReduceLROnPlateau conditioned on metric " + slot.monitor +
                                      " which is not available. Available metrics are: " + available +
                                      "]. Condition can be set using `monitor` key in lr scheduler dict");
        }
        log::warn_rank_zero("ReduceLROnPlateau conditioned on metric " + slot.monitor +
                            " which is not available but strict is set to `False`. Skipping learning rate update.");
        continue;
      }
      slot.plateau->step(*value);
      ++slot.steps;
    }
  }

 private:
  void add(std::size_t optimizer, const LRSchedulerConfig& config, bool dict_form) {
    TORCH_CHECK(config.frequency >= 1, "volt: an LR scheduler's frequency must be >= 1, got ", config.frequency);
    auto* plateau = dynamic_cast<optim::ReduceLROnPlateau*>(config.scheduler.get());
    auto* scheduler = dynamic_cast<optim::Scheduler*>(config.scheduler.get());
    if (automatic_ && plateau != nullptr && config.monitor.empty()) {
      throw MisconfigurationError(
          dict_form ? "The lr scheduler dict must include a monitor when a `ReduceLROnPlateau` scheduler is used. "
                      "For example: {\"optimizer\": optimizer, \"lr_scheduler\": {\"scheduler\": scheduler, "
                      "\"monitor\": \"your_loss\"}}"
                    : "`configure_optimizers` must include a monitor when a `ReduceLROnPlateau` scheduler is used. "
                      "For example: {\"optimizer\": optimizer, \"lr_scheduler\": scheduler, \"monitor\": "
                      "\"metric_to_track\"}");
    }
    if (!automatic_ && (!config.monitor.empty() || !config.strict)) {
      std::string keys = !config.monitor.empty() && !config.strict ? "['monitor', 'strict']"
                         : !config.monitor.empty()                 ? "['monitor']"
                                                                   : "['strict']";
      log::warn_rank_zero("The lr scheduler dict contains the key(s) " + keys +
                          ", but the keys will be ignored. You need to call `lr_scheduler.step()` manually in manual "
                          "optimization.");
    }
    schedulers_.push_back({config.scheduler, config.interval, config.frequency, 0, 0, optimizer, config.name,
                           config.monitor, config.strict, plateau,
                           scheduler != nullptr && scheduler->has_state() ? scheduler : nullptr});
  }

  std::vector<OptimizerConfig> configs_{};
  std::vector<SchedulerSlot> schedulers_{};
  bool automatic_ = true;
  bool replaced_by_callback_ = false;
  TrainerState* state_ = nullptr;
};

}  // namespace volt::detail

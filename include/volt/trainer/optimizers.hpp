/// \file
/// The optimizer of a fit and its LR schedulers (Lightning's core/optimizer.py: what configure_optimizers
/// returned, and when each scheduler steps).
#pragma once

#include <volt/trainer/module.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

namespace volt::detail {

/// An LR scheduler with its interval and frequency, and how far it has come.
struct SchedulerSlot {
  std::shared_ptr<torch::optim::LRScheduler> scheduler;
  SchedulerInterval interval;
  std::int64_t frequency;
  std::int64_t intervals = 0;  ///< intervals seen (steps or epochs)
  std::int64_t steps = 0;      ///< scheduler.step() calls, saved in checkpoints
};

/// The optimizer and schedulers of the running fit.
class Optimization {
 public:
  /// Takes what configure_optimizers() returned (once per fit).
  void configure(OptimizerConfig config) {
    config_ = std::move(config);
    schedulers_.clear();
    if (config_.lr_scheduler) {
      schedulers_.push_back({config_.lr_scheduler, config_.interval, std::max<std::int64_t>(1, config_.frequency)});
    }
  }

  /// The optimizer (configure() must have run).
  torch::optim::Optimizer& optimizer() const { return *config_.optimizer; }
  /// The optimizers, as TrainerState lists them.
  std::vector<torch::optim::Optimizer*> optimizers() const { return {config_.optimizer.get()}; }
  /// The schedulers in the order configure_optimizers gave them.
  std::vector<SchedulerSlot>& schedulers() { return schedulers_; }

  /// Steps the schedulers of `interval` whose frequency has come round (after an optimizer step, or at an
  /// epoch's end).
  void step_schedulers(SchedulerInterval interval) {
    for (auto& slot : schedulers_) {
      if (slot.interval != interval) continue;
      if (++slot.intervals % slot.frequency == 0) {
        slot.scheduler->step();
        ++slot.steps;
      }
    }
  }

 private:
  OptimizerConfig config_{};
  std::vector<SchedulerSlot> schedulers_{};
};

}  // namespace volt::detail

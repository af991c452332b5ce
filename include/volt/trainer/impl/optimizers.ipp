/// \file
/// Definitions of the functions declared in volt/trainer/optimizers.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE void Optimization::configure(std::vector<OptimizerConfig> configs, bool automatic, TrainerState* state) {
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

VOLT_INLINE auto Optimization::optimizers() const -> std::vector<torch::optim::Optimizer*> {
  std::vector<torch::optim::Optimizer*> result;
  for (const auto& config : configs_) result.push_back(config.optimizer.get());
  return result;
}

VOLT_INLINE void Optimization::replace_schedulers(std::shared_ptr<torch::optim::LRScheduler> scheduler) {
  schedulers_.clear();
  schedulers_.push_back({std::move(scheduler), SchedulerInterval::epoch, 1});
  replaced_by_callback_ = true;
}

VOLT_INLINE void Optimization::clear_replaced_schedulers() {
  schedulers_.clear();
  replaced_by_callback_ = true;
}

VOLT_INLINE void Optimization::step_schedulers(SchedulerInterval interval, std::int64_t index, SchedulerKinds kinds,
                                              bool with_metrics) {
  if (!automatic_) return;
  for (auto& slot : schedulers_) {
    if (slot.interval != interval || index % slot.frequency != 0) continue;
    if ((kinds == SchedulerKinds::plateau && slot.plateau == nullptr) ||
        (kinds == SchedulerKinds::non_plateau && slot.plateau != nullptr)) {
      continue;
    }
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

VOLT_INLINE void Optimization::add(std::size_t optimizer, const LRSchedulerConfig& config, bool dict_form) {
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
  schedulers_.push_back({config.scheduler, config.interval, config.frequency, 0, optimizer, config.name,
                         config.monitor, config.strict, plateau,
                         scheduler != nullptr && scheduler->has_state() ? scheduler : nullptr});
}

}  // namespace volt::detail

/// \file
/// volt::LearningRateMonitor: logs each optimizer's learning rate, and optionally its momentum and weight decay
/// (Lightning's LearningRateMonitor).
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/errors.hpp>
#include <volt/core/log.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <typeindex>
#include <typeinfo>
#include <vector>

#if __has_include(<cxxabi.h>)
#include <cxxabi.h>
#include <cstdlib>
#endif

namespace volt {

namespace detail {

/// The optimizer's class name without namespaces ("Adam", "SGD").
VOLT_INLINE std::string optimizer_name(const torch::optim::Optimizer& optimizer);

/// One LR scheduler as LearningRateMonitor reads it from the Trainer's scheduler configs.
struct MonitoredScheduler {
  /// The optimizer it schedules.
  torch::optim::Optimizer* optimizer = nullptr;
  /// The config's name (empty: none given).
  std::string name{};
  /// Whether it steps per training batch ("step") rather than per epoch.
  bool steps_per_batch = false;
};

/// Which schedulers a LearningRateMonitor reading covers (optimizers without a scheduler are always covered).
enum class MonitoredInterval { step, epoch, any };

/// Lightning's rule for LearningRateMonitor's momentum warning: true when some optimizer has neither a momentum
/// nor betas option (only the optimizers with a scheduler are looked at when there are schedulers), looked at
/// once for momentum and once for betas, so that an SGD and an Adam together also count.
VOLT_INLINE bool lacks_momentum(const std::vector<torch::optim::Optimizer*>& optimizers,
                                const std::vector<MonitoredScheduler>& schedulers);

/// Lightning's LearningRateMonitor values: for each scheduler of `interval`, then each optimizer without a scheduler,
/// the learning rate of each param group under its key ("lr-SGD", the scheduler's name, "-1" for the second of a
/// class, "/pg2" for the second param group), with `<key>-momentum` and `<key>-weight_decay` when asked.
VOLT_INLINE std::map<std::string, double> learning_rate_stats(const std::vector<torch::optim::Optimizer*>& optimizers,
                                                              const std::vector<MonitoredScheduler>& schedulers,
                                                              MonitoredInterval interval, bool log_momentum,
                                                              bool log_weight_decay, const std::string& key_prefix);

/// Lightning's bookkeeping of LearningRateMonitor.lrs: every key of `all` gets a list (a key with "/pg1" takes over
/// the list of the key without it, for an optimizer that gained param groups), then each rate of `logged` is
/// appended to its key's list.
VOLT_INLINE void record_learning_rates(std::map<std::string, std::vector<double>>& lrs,
                                       const std::map<std::string, double>& all,
                                       const std::map<std::string, double>& logged);

}  // namespace detail

/// The options of volt::LearningRateMonitor (Lightning's arguments).
struct LearningRateMonitorOptions {
  /// "step" or "epoch": log every optimizer's rates at that interval; empty (Lightning's None): follow each
  /// scheduler's own interval (step schedulers before training batches, epoch schedulers at epoch starts), and
  /// log the optimizers without a scheduler at both.
  std::string logging_interval{};
  /// Also log `<key>-momentum`: betas[0] for Adam and AdamW, momentum for SGD and RMSprop, 0 for the others.
  bool log_momentum = false;
  /// Also log `<key>-weight_decay`, each param group's weight_decay.
  bool log_weight_decay = false;
  /// The start of the keys built from an optimizer's class name; unset: "lr-" (Lightning 2.6.6's, which has
  /// no such argument). A scheduler config's name is used as it is.
  std::optional<std::string> log_key_prefix{};
};

/// Callback: writes each optimizer's learning rate (per parameter group) to the loggers, on global rank zero,
/// as Lightning's LearningRateMonitor does. Keys: the scheduler config's name, else "lr-" + the optimizer's
/// class name, "-1", "-2"... for further unnamed optimizers of a class, "/pg1", "/pg2"... when an optimizer has
/// several param groups. The step is Lightning's _batches_that_stepped (training batches that ran an optimizer
/// step); the values also go into the callback metrics (so ModelCheckpoint or EarlyStopping can monitor them).
class LearningRateMonitor {
 public:
  /// Throws MisconfigurationError when logging_interval is not "step", "epoch" or empty.
  explicit LearningRateMonitor(LearningRateMonitorOptions options = {});

  /// Runs once before the first training epoch, on every rank. Throws MisconfigurationError when the Trainer
  /// has no logger; with log_momentum, warns (once, Lightning's text) when some optimizer has no momentum.
  template <class State>
  void on_train_start(State& state) {
    if (state.loggers.empty()) {
      throw MisconfigurationError("Cannot use `LearningRateMonitor` callback with `Trainer` that has no logger.");
    }
    lrs_.clear();
    for (const auto& entry : detail::learning_rate_stats(state.optimizers, schedulers(state),
                                                         detail::MonitoredInterval::any, false, false, prefix())) {
      lrs_[entry.first];
    }
    if (options_.log_momentum && detail::lacks_momentum(state.optimizers, schedulers(state))) {
      log::warn_once(
          "You have set log_momentum=True, but some optimizers do not have momentum. This will log a value 0 for "
          "the momentum.");
    }
  }

  /// Before each training batch whose step is logged (Lightning's should_update_logs: the next step is a multiple
  /// of log_every_n_steps, or a stop was requested): the step-interval schedulers' rates and those of the
  /// optimizers without a scheduler (every rate with "step"; nothing with "epoch").
  template <class State>
  void on_train_batch_start(State& state, std::int64_t) {
    if (options_.logging_interval == "epoch") return;
    const std::int64_t stepped = batches_that_stepped(state);
    const bool update_logs =
        state.log_every_n_steps != 0 && ((stepped + 1) % state.log_every_n_steps == 0 || state.should_stop);
    if (!update_logs) return;
    write(state, options_.logging_interval.empty() ? detail::MonitoredInterval::step : detail::MonitoredInterval::any,
          stepped);
  }

  /// At each training epoch's start: the epoch-interval schedulers' rates and those of the optimizers without a
  /// scheduler (every rate with "epoch"; nothing with "step").
  template <class State>
  void on_train_epoch_start(State& state) {
    if (options_.logging_interval == "step") return;
    write(state, options_.logging_interval.empty() ? detail::MonitoredInterval::epoch : detail::MonitoredInterval::any,
          batches_that_stepped(state));
  }

  /// Every learning rate written so far in this fit, per key, in order (Lightning's `lrs`); the keys of every
  /// scheduler and optimizer are there from train start on.
  const std::map<std::string, std::vector<double>>& lrs() const noexcept { return lrs_; }

 private:
  /// The start of the keys built from a class name: log_key_prefix, or "lr-".
  std::string prefix() const { return options_.log_key_prefix.value_or("lr-"); }
  /// The Trainer's scheduler configs (Lightning's trainer.lr_scheduler_configs), as the monitor reads them.
  template <class State>
  static std::vector<detail::MonitoredScheduler> schedulers(State& state) {
    std::vector<detail::MonitoredScheduler> out;
    if constexpr (requires { state.optimization_->schedulers(); }) {
      if (state.optimization_ == nullptr) return out;
      for (const auto& slot : state.optimization_->schedulers()) {
        if (slot.optimizer >= state.optimizers.size()) continue;
        out.push_back({state.optimizers[slot.optimizer], slot.name,
                       slot.interval == decltype(slot.interval)::step});
      }
    }
    return out;
  }

  /// Lightning's _batches_that_stepped: training batches that ran an optimizer step so far (global_step under
  /// automatic optimization, which steps one optimizer per batch; counted per batch under manual optimization).
  template <class State>
  static std::int64_t batches_that_stepped(State& state) {
    if constexpr (requires { state.optimization_->batches_stepped; }) {
      if (state.optimization_ != nullptr && !state.optimization_->automatic()) {
        return state.optimization_->batches_stepped;
      }
    }
    return state.global_step;
  }

  /// Reads the values of `interval`, records the rates in lrs(), puts the values into the callback metrics and,
  /// when there are any, writes them to every logger at `step` (global rank zero only).
  template <class State>
  void write(State& state, detail::MonitoredInterval interval, std::int64_t step) {
    const auto monitored = schedulers(state);
    const auto values = detail::learning_rate_stats(state.optimizers, monitored, interval, options_.log_momentum,
                                                    options_.log_weight_decay, prefix());
    detail::record_learning_rates(lrs_, detail::learning_rate_stats(state.optimizers, monitored,
                                                                    detail::MonitoredInterval::any, false, false, prefix()),
                                  detail::learning_rate_stats(state.optimizers, monitored, interval, false, false, prefix()));
    if constexpr (requires { state.update_callback_metrics(values); }) state.update_callback_metrics(values);
    if (values.empty() || !state.is_global_zero) return;
    for (auto* logger : state.loggers) logger->log_metrics(values, step);
  }

  LearningRateMonitorOptions options_;
  std::map<std::string, std::vector<double>> lrs_{};
};

}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/callbacks/impl/learning_rate_monitor.ipp>
#endif

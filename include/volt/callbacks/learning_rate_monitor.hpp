/// \file
/// volt::LearningRateMonitor: logs each optimizer's learning rate (Lightning's LearningRateMonitor).
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/errors.hpp>

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <typeinfo>

#if __has_include(<cxxabi.h>)
#include <cxxabi.h>
#include <cstdlib>
#endif

namespace volt {

namespace detail {
/// The optimizer's class name without namespaces ("Adam", "SGD").
VOLT_INLINE std::string optimizer_name(const torch::optim::Optimizer& optimizer);
}  // namespace detail

/// The options of volt::LearningRateMonitor.
struct LearningRateMonitorOptions {
  /// "step", "epoch", or empty: log at every step (volt's schedulers are stepped per epoch or per step,
  /// and logging per step shows both).
  std::string logging_interval{};
  /// Prefix of every logged key, before the optimizer's class name.
  std::string log_key_prefix = "lr-";
};

/// Callback: writes each optimizer's learning rate (per parameter group) to the loggers, on global rank zero,
/// as Lightning's LearningRateMonitor does.
class LearningRateMonitor {
 public:
  /// Throws MisconfigurationError when logging_interval is not "step", "epoch" or empty.
  explicit LearningRateMonitor(LearningRateMonitorOptions options = {});

  /// Runs at fit start. Throws MisconfigurationError when the Trainer has no logger.
  template <class State>
  void on_fit_start(State& state) {
    if (state.loggers.empty()) {
      throw MisconfigurationError("Cannot use `LearningRateMonitor` callback with `Trainer` that has no logger.");
    }
  }

  /// Before each training batch whose step is logged (log_every_n_steps): logs the rates, unless the interval is
  /// "epoch".
  template <class State>
  void on_train_batch_start(State& state, std::int64_t) {
    if (options_.logging_interval == "epoch") return;
    if (state.log_every_n_steps == 0 || (state.global_step + 1) % state.log_every_n_steps != 0) return;
    state.log_to_loggers(values(state));
  }
  /// At each training epoch start: logs the rates when the interval is "epoch".
  template <class State>
  void on_train_epoch_start(State& state) {
    if (options_.logging_interval == "epoch") state.log_to_loggers(values(state));
  }

  /// "lr-Adam" (or "lr-Adam/pg1"... for several parameter groups; "lr-Adam-1" for a second Adam).
  template <class State>
  std::map<std::string, double> values(const State& state) const {
    std::map<std::string, double> out;
    std::map<std::string, int> seen;
    for (torch::optim::Optimizer* optimizer : state.optimizers) {
      std::string key = options_.log_key_prefix + detail::optimizer_name(*optimizer);
      if (const int n = seen[key]++; n > 0) key += "-" + std::to_string(n);
      const auto& groups = optimizer->param_groups();
      for (std::size_t g = 0; g < groups.size(); ++g) {
        out[groups.size() == 1 ? key : key + "/pg" + std::to_string(g + 1)] = groups[g].options().get_lr();
      }
    }
    return out;
  }

 private:
  LearningRateMonitorOptions options_;
};

}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/callbacks/impl/learning_rate_monitor.ipp>
#endif

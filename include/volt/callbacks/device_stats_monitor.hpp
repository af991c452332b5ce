/// \file
/// volt::DeviceStatsMonitor: logs the accelerator's device statistics around training batches.
#pragma once

#include <volt/core/errors.hpp>

#include <cstdint>
#include <map>
#include <string>

namespace volt {

/// Logs `accelerator.get_device_stats(root_device)` at the start and end of training batches whose step
/// is logged, under `DeviceStatsMonitor.on_train_batch_start/<key>` and `.../on_train_batch_end/<key>`.
class DeviceStatsMonitor {
 public:
  /// Runs at fit start on every rank. Throws MisconfigurationError when the Trainer has no logger.
  template <class State>
  void on_fit_start(State& state) {
    if (state.loggers.empty()) {
      throw MisconfigurationError("Cannot use `DeviceStatsMonitor` callback with `Trainer(logger=False)`.");
    }
  }
  /// Before each training batch: logs the device statistics when this step is logged (global rank zero writes).
  template <class State>
  void on_train_batch_start(State& state, std::int64_t) { record(state, "on_train_batch_start"); }
  /// After each training batch: logs the device statistics when this step is logged (global rank zero writes).
  template <class State>
  void on_train_batch_end(State& state, const torch::Tensor&, std::int64_t) {
    record(state, "on_train_batch_end");
  }

 private:
  template <class State>
  static void record(State& state, const std::string& hook) {
    if (!state.device_stats || state.log_every_n_steps == 0 ||
        (state.global_step + 1) % state.log_every_n_steps != 0) {
      return;
    }
    std::map<std::string, double> prefixed;
    for (const auto& [key, value] : state.device_stats()) prefixed["DeviceStatsMonitor." + hook + "/" + key] = value;
    state.log_to_loggers(prefixed);
  }
};

}  // namespace volt

/// \file
/// What `ctx.log(name, value, {...})` takes: volt::LogOptions (Lightning's `self.log` arguments), volt::Reduce
/// and the phase a value was logged in.
#pragma once

#include <optional>

namespace volt {

/// How a metric logged on every step is reduced to its epoch value.
enum class Reduce {
  mean,  ///< The mean of the step values (the default).
  sum,   ///< The sum of the step values.
  max,   ///< The largest step value.
  min,   ///< The smallest step value.
};

/// Options of StepContext::log, Lightning's `self.log(..., prog_bar=..., on_step=..., on_epoch=...)`.
struct LogOptions {
  /// Show the value in the progress bar.
  bool prog_bar = false;
  /// Record the value of each step; default: true in training_step, false in evaluation steps.
  std::optional<bool> on_step{};
  /// Record the epoch's reduction of the values; default: false in training_step, true in evaluation steps.
  std::optional<bool> on_epoch{};
  /// Send the value to the loggers (CSV, TensorBoard).
  bool logger = true;
  /// How on_epoch reduces the step values (Lightning's reduce_fx); under DDP the same reduction then
  /// combines the ranks' epoch values.
  Reduce reduce = Reduce::mean;
};

/// The phase a value was logged in; evaluation values aggregate separately from training values.
enum class MetricPhase {
  train,       ///< Logged in training_step or a training hook.
  validation,  ///< Logged in validation_step (also during the sanity check) or a validation hook.
  test,        ///< Logged in test_step or a test hook.
  predict,     ///< Logged in predict_step.
};

}  // namespace volt

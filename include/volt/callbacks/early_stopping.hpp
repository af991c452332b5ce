/// \file
/// volt::EarlyStopping: stop training when a monitored metric stops improving (Lightning's EarlyStopping).
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/errors.hpp>
#include <volt/core/log.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>

namespace volt {

// Field order lets the common options read naturally with designated initializers:
// `volt::EarlyStopping{{.monitor = "val_acc", .mode = "max", .patience = 2}}`.
/// The options of volt::EarlyStopping (Lightning's EarlyStopping arguments).
struct EarlyStoppingOptions {
  /// Name of the logged metric to watch; required (the constructor throws when it is empty).
  std::string monitor{};
  /// "min": lower is better; "max": higher is better. Anything else makes the constructor throw.
  std::string mode = "min";
  /// Checks without improvement before stopping (checks, not epochs: one per validation run).
  std::int64_t patience = 3;
  /// Smallest change that counts as an improvement.
  double min_delta = 0.0;
  /// Log every check's result (on global rank zero); without it only the stop itself is logged.
  bool verbose = false;
  /// Throw when the monitored metric is missing (else warn and skip the check).
  bool strict = true;
  /// Stop when the monitored metric becomes NaN or infinite.
  bool check_finite = true;
  /// Stop as soon as the metric is better than this.
  std::optional<double> stopping_threshold{};
  /// Stop as soon as the metric is worse than this.
  std::optional<double> divergence_threshold{};
  /// Check at the end of the training epoch (true) or of validation (false); nullopt decides as Lightning.
  std::optional<bool> check_on_train_epoch_end{};
};

/// Callback: stops training when the monitored metric has not improved for `patience` checks, becomes
/// non-finite, or crosses a threshold (Lightning's EarlyStopping). A check runs at the end of the training
/// epoch or of validation (see check_on_train_epoch_end), only while fitting and never under fast_dev_run; it
/// runs on every rank and sets `state.should_stop`.
/// Its counters are saved in checkpoints (save_state/load_state).
class EarlyStopping {
 public:
  /// Checks the options. Throws MisconfigurationError for a mode other than "min"/"max", an empty monitor or a
  /// negative patience.
  explicit EarlyStopping(EarlyStoppingOptions options);

  /// The options as given.
  const EarlyStoppingOptions& options() const { return options_; }
  /// Checks since the last improvement (Lightning's wait_count).
  std::int64_t wait_count() const { return wait_count_; }
  /// The best monitored value so far; +inf ("min") or -inf ("max") before the first check.
  double best_score() const { return best_score_; }
  /// Epoch at which this callback stopped training (0 if it did not).
  std::int64_t stopped_epoch() const { return stopped_epoch_; }
  /// Why the last check stopped training (empty if it did not).
  const std::string& stopping_reason() const { return stopping_reason_; }

  /// Hook: runs the check at the end of each training epoch, when checks run there.
  template <class State>
  void on_train_epoch_end(State& state) {
    if (!check_on_train_epoch_end(state) || skip(state)) return;
    run_check(state);
  }
  /// Hook: runs the check at the end of each validation run, when checks do not run at the training epoch end.
  template <class State>
  void on_validation_end(State& state) {
    if (check_on_train_epoch_end(state) || skip(state)) return;
    run_check(state);
  }

  /// Writes wait_count, stopped_epoch, best_score and patience into the callback's part of a checkpoint.
  void save_state(torch::serialize::OutputArchive& archive) const;
  /// Restores wait_count, stopped_epoch and best_score from a checkpoint (patience stays as constructed).
  /// Throws what LibTorch's archive throws when a key is missing.
  void load_state(torch::serialize::InputArchive& archive);

 private:
  template <class State>
  bool check_on_train_epoch_end(const State& state) const {
    if (options_.check_on_train_epoch_end) return *options_.check_on_train_epoch_end;
    return state.validates_at_epoch_end;
  }
  template <class State>
  static bool skip(const State& state) { return state.stage != State::Stage::fitting || state.fast_dev_run; }

  bool improves(double current, double reference) const;

  static std::string number(double value);

  template <class State>
  void run_check(State& state) {
    const auto current = state.metric(options_.monitor);
    if (!current) {
      std::string available;
      for (const auto& [key, value] : state.callback_metrics()) available += (available.empty() ? "`" : "`, `") + key;
      if (!available.empty()) available += "`";
      const std::string message = "Early stopping conditioned on metric `" + options_.monitor +
                                  "` which is not available. Pass in or modify your `EarlyStopping` callback to use "
                                  "any of the following: " + available;
      if (options_.strict) throw std::runtime_error(message);
      if (options_.verbose) log::warn_rank_zero(message);
      return;
    }
    bool should_stop = false;
    std::string reason;
    const double value = *current;
    if (options_.check_finite && !std::isfinite(value)) {
      should_stop = true;
      reason = "Monitored metric " + options_.monitor + " = " + number(value) +
               " is not finite. Previous best value was " + number(best_score_) + ". Signaling Trainer to stop.";
    } else if (options_.stopping_threshold && improves(value, *options_.stopping_threshold)) {
      should_stop = true;
      reason = "Stopping threshold reached: " + options_.monitor + " = " + number(value) +
               (options_.mode == "min" ? " < " : " > ") + number(*options_.stopping_threshold) +
               ". Signaling Trainer to stop.";
    } else if (options_.divergence_threshold && improves(-value, -*options_.divergence_threshold)) {
      should_stop = true;
      reason = "Divergence threshold reached: " + options_.monitor + " = " + number(value) +
               (options_.mode == "min" ? " > " : " < ") + number(*options_.divergence_threshold) +
               ". Signaling Trainer to stop.";
    } else if (improves(value - min_delta_, best_score_)) {
      if (options_.verbose) {
        reason = std::isfinite(best_score_)
                     ? "Metric " + options_.monitor + " improved by " + number(std::abs(best_score_ - value)) +
                           " >= min_delta = " + number(std::abs(min_delta_)) + ". New best score: " + number(value)
                     : "Metric " + options_.monitor + " improved. New best score: " + number(value);
      }
      best_score_ = value;
      wait_count_ = 0;
    } else {
      ++wait_count_;
      if (wait_count_ >= options_.patience) {
        should_stop = true;
        reason = "Monitored metric " + options_.monitor + " did not improve in the last " +
                 std::to_string(wait_count_) + " records. Best score: " + number(best_score_) +
                 ". Signaling Trainer to stop.";
      }
    }
    if (should_stop) {
      state.should_stop = true;
      stopped_epoch_ = state.current_epoch;
      stopping_reason_ = reason;
    }
    if (!reason.empty() && (options_.verbose || should_stop)) log::info_rank_zero(reason);
  }

  EarlyStoppingOptions options_;
  double min_delta_ = 0.0;
  double best_score_ = 0.0;
  std::int64_t wait_count_ = 0;
  std::int64_t stopped_epoch_ = 0;
  std::string stopping_reason_{};
};

}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/callbacks/impl/early_stopping.ipp>
#endif

/// \file
/// volt::Timer: the time spent in training, validation and testing, and a time limit that stops fit
/// (Lightning's Timer callback; `TrainerOptions::max_time` adds one). Its state is saved in checkpoints, so a
/// resumed fit counts the training time already spent.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/duration.hpp>
#include <volt/core/log.hpp>

#include <torch/torch.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace volt {

/// When volt::Timer checks its limit: after every training batch, or at the end of every training epoch.
enum class TimerInterval {
  step,   ///< After each training batch (on_train_batch_end; what max_time uses).
  epoch,  ///< At the end of each training epoch.
};

/// The stages volt::Timer times (Lightning's RunningStage values "train", "validate", "test").
enum class TimerStage {
  train,     ///< From on_train_start to on_train_end, plus the training time of the checkpoint resumed from.
  validate,  ///< From on_validation_start to on_validation_end (the last validation run, the sanity check included).
  test,      ///< From on_test_start to on_test_end (the last test run).
};

/// The options of volt::Timer (Lightning's Timer arguments).
struct TimerOptions {
  /// The training time after which fit stops (nullopt: no limit, the Timer only measures).
  std::optional<Duration> duration{};
  /// When the limit is checked.
  TimerInterval interval = TimerInterval::step;
  /// Log "Time limit reached. Elapsed time is 0:00:05. Signaling Trainer to stop." on global rank zero.
  bool verbose = true;
};

/// Callback: measures each stage with a monotonic clock and, when a duration is given, sets the Trainer's
/// should_stop once the training time reaches it (checked at fit start and after each batch or epoch). The
/// decision is agreed across ranks (it stops every rank when the time ran out on any). min_steps and min_epochs
/// still hold: training goes on until they are met. Saved in checkpoints: the training time elapsed, which a
/// resumed fit adds to its own.
class Timer {
 public:
  /// The clock the Timer reads.
  using Clock = std::chrono::steady_clock;

  /// A Timer with the given options.
  explicit Timer(TimerOptions options = {}) : options_(std::move(options)) {}
  /// A Timer stopping fit after `duration`, checked at `interval`.
  explicit Timer(Duration duration, TimerInterval interval = TimerInterval::step, bool verbose = true)
      : Timer(TimerOptions{duration, interval, verbose}) {}

  /// The limit (nullopt: none).
  const std::optional<Duration>& duration() const { return options_.duration; }

  /// When the stage last started (nullopt: not yet).
  std::optional<Clock::time_point> start_time(TimerStage stage = TimerStage::train) const;
  /// When the stage last ended (nullopt: not yet, or it is running).
  std::optional<Clock::time_point> end_time(TimerStage stage = TimerStage::train) const { return end_[index(stage)]; }

  /// Seconds spent in the stage: up to now while it runs, to its end once it ended; for training, plus the
  /// training time of the checkpoint the fit resumed from.
  double time_elapsed(TimerStage stage = TimerStage::train) const;

  /// Seconds left before the limit (negative once past it); nullopt without a duration.
  std::optional<double> time_remaining(TimerStage stage = TimerStage::train) const;

  /// Hook: checks the limit before anything runs (a resumed fit may have none left).
  template <class State>
  void on_fit_start(State& state) {
    if (options_.duration) check_time_remaining(state);
  }
  /// Hook: training starts.
  template <class State>
  void on_train_start(State&) {
    start(TimerStage::train);
  }
  /// Hook: training ends.
  template <class State>
  void on_train_end(State&) {
    end_[index(TimerStage::train)] = Clock::now();
  }
  /// Hook: a validation run starts.
  template <class State>
  void on_validation_start(State&) {
    start(TimerStage::validate);
  }
  /// Hook: a validation run ends.
  template <class State>
  void on_validation_end(State&) {
    end_[index(TimerStage::validate)] = Clock::now();
  }
  /// Hook: a test run starts.
  template <class State>
  void on_test_start(State&) {
    start(TimerStage::test);
  }
  /// Hook: a test run ends.
  template <class State>
  void on_test_end(State&) {
    end_[index(TimerStage::test)] = Clock::now();
  }
  /// Hook: checks the limit after each training batch (interval step).
  template <class State>
  void on_train_batch_end(State& state, const torch::Tensor&, std::int64_t) {
    if (options_.interval == TimerInterval::step && options_.duration) check_time_remaining(state);
  }
  /// Hook: checks the limit at the end of each training epoch (interval epoch).
  template <class State>
  void on_train_epoch_end(State& state) {
    if (options_.interval == TimerInterval::epoch && options_.duration) check_time_remaining(state);
  }

  /// Writes the seconds elapsed per stage ("time_elapsed/train", ".../validate", ".../test"), as Lightning's
  /// state_dict holds them.
  void save_state(torch::serialize::OutputArchive& archive) const;
  /// Reads the training time of a checkpoint: a resumed fit counts it as already spent. Throws what
  /// LibTorch's archive throws when the key is missing.
  void load_state(torch::serialize::InputArchive& archive);

 private:
  static constexpr std::size_t index(TimerStage stage) { return static_cast<std::size_t>(stage); }

  void start(TimerStage stage);

  template <class State>
  void check_time_remaining(State& state) {
    bool should_stop = time_elapsed(TimerStage::train) >= options_.duration->seconds();
    if constexpr (requires { state.decide_across_ranks(should_stop); }) {
      if (state.decide_across_ranks) should_stop = state.decide_across_ranks(should_stop);
    }
    state.should_stop = state.should_stop || should_stop;
    if (should_stop && options_.verbose) {
      const auto whole = static_cast<std::int64_t>(time_elapsed(TimerStage::train));
      log::info_rank_zero("Time limit reached. Elapsed time is " + Duration::format_seconds(whole) +
                          ". Signaling Trainer to stop.");
    }
  }

  TimerOptions options_;
  std::array<std::optional<Clock::time_point>, 3> start_{};
  std::array<std::optional<Clock::time_point>, 3> end_{};
  double offset_ = 0.0;
};

}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/callbacks/impl/timer.ipp>
#endif

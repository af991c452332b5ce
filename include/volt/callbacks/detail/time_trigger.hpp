/// \file
/// The time trigger of ModelCheckpoint(train_time_interval): due once the interval has passed since training
/// started or since it was last due, decided alike on every rank. Implementation of
/// volt/callbacks/model_checkpoint.hpp, no public API.
#pragma once

#include <volt/core/duration.hpp>

#include <chrono>
#include <optional>

namespace volt::detail {

/// Lightning's `_last_time_checked` logic (ModelCheckpoint.on_train_batch_end).
class TimeTrigger {
 public:
  /// A trigger every `interval` (nullopt: never due).
  explicit TimeTrigger(std::optional<Duration> interval) : interval_(interval) {}

  /// Training starts: the interval counts from now.
  void start() { last_ = std::chrono::steady_clock::now(); }

  /// Whether the interval has passed since start() or the last time it was due, on any rank (the decision is
  /// a collective under DDP when the state offers decide_across_ranks, so every rank calls this alike).
  template <class State>
  bool due(State& state) {
    if (!interval_) return false;
    const auto now = std::chrono::steady_clock::now();
    bool result = last_ && std::chrono::duration<double>(now - *last_) >= interval_->value();
    if constexpr (requires { state.decide_across_ranks(result); }) {
      if (state.decide_across_ranks) result = state.decide_across_ranks(result);
    }
    if (result) last_ = now;
    return result;
  }

 private:
  std::optional<Duration> interval_;
  std::optional<std::chrono::steady_clock::time_point> last_{};
};

}  // namespace volt::detail

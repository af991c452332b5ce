/// \file
/// volt::GradientAccumulationScheduler: accumulate_grad_batches changing with the epoch (Lightning's
/// GradientAccumulationScheduler callback), e.g. `{{0, 8}, {4, 4}, {8, 1}}`: 8 batches per optimizer step in
/// epochs 0-3, 4 in epochs 4-7, then 1.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/errors.hpp>

#include <torch/torch.h>

#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>

namespace volt {

/// Callback: sets the Trainer's accumulation factor (TrainerState::accumulate_grad_batches) at the start of
/// every training epoch from `scheduling` (first epoch -> factor; an epoch uses the entry of the largest first
/// epoch not after it; epochs before the smallest key use 1). TrainerOptions::accumulate_grad_batches must
/// stay 1 (fit throws std::invalid_argument otherwise, as Lightning's ValueError).
class GradientAccumulationScheduler {
 public:
  /// Checks `scheduling` as Lightning does: an empty map throws std::invalid_argument ("Empty dict cannot be
  /// interpreted correct"), a negative epoch or a factor below 1 volt::MisconfigurationError with Lightning's
  /// message (the keys or values listed in epoch order).
  explicit GradientAccumulationScheduler(std::map<std::int64_t, std::int64_t> scheduling);
  /// The schedule as a list of {first epoch, factor} pairs: `GradientAccumulationScheduler({{0, 8}, {4, 2}})`.
  explicit GradientAccumulationScheduler(
      std::initializer_list<std::pair<const std::int64_t, std::int64_t>> scheduling)
      : GradientAccumulationScheduler(std::map<std::int64_t, std::int64_t>(scheduling)) {}

  /// The schedule (with epoch 0 added, factor 1, when it had no entry).
  const std::map<std::int64_t, std::int64_t>& scheduling() const { return scheduling_; }

  /// Whether any factor is above 1.
  bool going_to_accumulate_grad_batches() const;

  /// The factor for `epoch`.
  std::int64_t get_accumulate_grad_batches(std::int64_t epoch) const;

  /// Hook: refuses a Trainer that accumulates already (Lightning's ValueError), then sets the factor of the
  /// epoch training starts in (also the epoch a checkpoint resumes in the middle of).
  template <class State>
  void on_train_start(State& state) {
    if (state.accumulate_grad_batches != 1) {
      throw std::invalid_argument(
          "You have set `accumulate_grad_batches` and are using the `GradientAccumulationScheduler` callback. Either "
          "remove `accumulate_grad_batches` from the Trainer or remove the callback.");
    }
    state.accumulate_grad_batches = get_accumulate_grad_batches(state.current_epoch);
  }

  /// Hook: sets the factor of the epoch starting.
  template <class State>
  void on_train_epoch_start(State& state) {
    state.accumulate_grad_batches = get_accumulate_grad_batches(state.current_epoch);
  }

 private:
  void check();

  std::map<std::int64_t, std::int64_t> scheduling_;
};

}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/callbacks/impl/gradient_accumulation_scheduler.ipp>
#endif

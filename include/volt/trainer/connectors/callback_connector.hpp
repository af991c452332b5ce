/// \file
/// The callback connector (Lightning's trainer/connectors/callback_connector.py): the Trainer's callbacks in
/// their order (checkpointing last), the default ones (progress bar, model summary, checkpointing) and the
/// rules that forbid conflicting ones, and each callback's key in checkpoints.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/callbacks.hpp>
#include <volt/core/errors.hpp>
#include <volt/trainer/options.hpp>
#include <volt/trainer/state.hpp>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace volt::detail {

/// The Trainer's callbacks: each receives the TrainerState first.
using TrainerCallbacks = CallbackList<TrainerState>;

/// A callback and its key in checkpoints.
using CallbackStateKey = std::pair<AnyCallback<TrainerState>*, std::string>;

/// Collects the callbacks given to the Trainer and completes them with the defaults.
class CallbackConnector {
 public:
  /// Adds a callback given to the Trainer's constructor. ModelCheckpoint callbacks are held back and go after
  /// the others (see finish).
  template <class C>
  void add(C&& callback) {
    if constexpr (std::same_as<std::remove_cvref_t<C>, ModelCheckpoint>) {
      add_checkpoint(std::forward<C>(callback));
    } else {
      callbacks_.add(std::forward<C>(callback));
    }
  }
  /// Holds a ModelCheckpoint back until reorder.
  void add_checkpoint(ModelCheckpoint callback);

  /// After every extra, before reorder: the Timer max_time asks for (Lightning's _configure_timer_callback),
  /// unless one was given. It goes before the checkpoint callbacks, so that a checkpoint written after a batch
  /// holds the time counted at that batch.
  void add_timer(const TrainerOptions& options);

  /// After every extra, as Lightning's _reorder_callbacks: checkpoint callbacks run after the others (so a
  /// checkpoint written in a hook holds the other callbacks' state after that hook: exact resume).
  void reorder();

  /// The default callbacks the options ask for, with Lightning's errors for conflicts.
  void add_defaults(const TrainerOptions& options);

  /// The callbacks.
  TrainerCallbacks& list() { return callbacks_; }

  /// Whether Lightning counts `callback` among the monitoring callbacks (checkpointing, early stopping), which
  /// run their on_train_epoch_end after the model's, once the epoch's values are reduced.
  static bool is_monitoring(AnyCallback<TrainerState>& callback);

  /// Runs on_train_epoch_end of the callbacks that are monitoring ones (`monitoring`) or the others.
  void run_train_epoch_end(TrainerState& state, bool monitoring);

  /// Each callback's entry in a checkpoint: its type and its rank among callbacks of that type (as
  /// Lightning's state_key), so a resume with callbacks added, removed or reordered finds the right state.
  /// (`mangled`: the keys checkpoints of volt 0.1 format 1 used, from the compiler's mangled type names.)
  std::vector<CallbackStateKey> state_keys(bool mangled = false) const;

 private:
  TrainerCallbacks callbacks_;
  std::vector<ModelCheckpoint> deferred_checkpoints_;
};

// With VOLT_SEPARATE_COMPILATION the Trainer's callback list (its run_<hook> functions) and the erased forms of
// volt's own callbacks (each one's vtable and every hook, instantiated for TrainerState) are compiled once, with
// VOLT_IMPLEMENTATION, not in every program.
#if defined(VOLT_DETAIL_INSTANTIATE)
VOLT_DETAIL_INSTANTIATE class CallbackList<TrainerState>;
#define VOLT_DETAIL_ERASED_CALLBACK(C) VOLT_DETAIL_INSTANTIATE class CallbackModel<C, TrainerState>;
VOLT_DETAIL_ERASED_CALLBACK(ProgressBar) VOLT_DETAIL_ERASED_CALLBACK(ModelSummary)
VOLT_DETAIL_ERASED_CALLBACK(ModelCheckpoint) VOLT_DETAIL_ERASED_CALLBACK(EarlyStopping)
VOLT_DETAIL_ERASED_CALLBACK(Timer) VOLT_DETAIL_ERASED_CALLBACK(LearningRateMonitor)
VOLT_DETAIL_ERASED_CALLBACK(DeviceStatsMonitor) VOLT_DETAIL_ERASED_CALLBACK(GradientAccumulationScheduler)
VOLT_DETAIL_ERASED_CALLBACK(HistogramMonitor) VOLT_DETAIL_ERASED_CALLBACK(WeightAveraging)
VOLT_DETAIL_ERASED_CALLBACK(EMAWeightAveraging) VOLT_DETAIL_ERASED_CALLBACK(StochasticWeightAveraging)
#undef VOLT_DETAIL_ERASED_CALLBACK
#endif

}  // namespace volt::detail

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/trainer/connectors/impl/callback_connector.ipp>
#endif

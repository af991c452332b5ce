/// \file
/// The callback connector (Lightning's trainer/connectors/callback_connector.py): the Trainer's callbacks in
/// their order (checkpointing last), the default ones (progress bar, model summary, checkpointing) and the
/// rules that forbid conflicting ones, and each callback's key in checkpoints.
#pragma once

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
      deferred_checkpoints_.push_back(std::forward<C>(callback));
    } else {
      callbacks_.add(std::forward<C>(callback));
    }
  }

  /// After every extra, before reorder: the Timer max_time asks for (Lightning's _configure_timer_callback),
  /// unless one was given. It goes before the checkpoint callbacks, so that a checkpoint written after a batch
  /// holds the time counted at that batch.
  void add_timer(const TrainerOptions& options) {
    if (!options.max_time) return;
    if (callbacks_.count<Timer>() > 0) {
      log::info_rank_zero("Ignoring `Trainer(max_time=...)`, callbacks list already contains a Timer.");
    } else {
      callbacks_.add(Timer(*options.max_time, TimerInterval::step));
    }
  }

  /// After every extra, as Lightning's _reorder_callbacks: checkpoint callbacks run after the others (so a
  /// checkpoint written in a hook holds the other callbacks' state after that hook: exact resume).
  void reorder() {
    for (auto& checkpoint : deferred_checkpoints_) callbacks_.add(std::move(checkpoint));
    deferred_checkpoints_.clear();
  }

  /// The default callbacks the options ask for, with Lightning's errors for conflicts.
  void add_defaults(const TrainerOptions& options) {
    const auto progress_bars = callbacks_.count<ProgressBar>();
    if (progress_bars > 1) {
      throw MisconfigurationError(
          "You added multiple progress bar callbacks to the Trainer, but currently only one progress bar is supported.");
    }
    if (!options.enable_progress_bar && progress_bars == 1) {
      throw MisconfigurationError(
          "Trainer was configured with `enable_progress_bar=False` but found `ProgressBar` in callbacks list.");
    }
    if (!options.enable_checkpointing && callbacks_.count<ModelCheckpoint>() > 0) {
      throw MisconfigurationError(
          "Trainer was configured with `enable_checkpointing=False` but found `ModelCheckpoint` in callbacks list.");
    }
    if (options.enable_progress_bar && progress_bars == 0) callbacks_.add(ProgressBar{});
    if (options.enable_model_summary && callbacks_.count<ModelSummary>() == 0) callbacks_.add(ModelSummary{});
    if (options.enable_checkpointing && callbacks_.count<ModelCheckpoint>() == 0) callbacks_.add(ModelCheckpoint{});
  }

  /// The callbacks.
  TrainerCallbacks& list() { return callbacks_; }

  /// Whether Lightning counts `callback` among the monitoring callbacks (checkpointing, early stopping), which
  /// run their on_train_epoch_end after the model's, once the epoch's values are reduced.
  static bool is_monitoring(AnyCallback<TrainerState>& callback) {
    return callback.get(typeid(ModelCheckpoint)) != nullptr || callback.get(typeid(EarlyStopping)) != nullptr;
  }

  /// Runs on_train_epoch_end of the callbacks that are monitoring ones (`monitoring`) or the others.
  void run_train_epoch_end(TrainerState& state, bool monitoring) {
    for (auto* callback : callbacks_.with(Hook::on_train_epoch_end)) {
      if (is_monitoring(*callback) == monitoring) callback->on_train_epoch_end(state);
    }
  }

  /// Each callback's entry in a checkpoint: its type and its rank among callbacks of that type (as
  /// Lightning's state_key), so a resume with callbacks added, removed or reordered finds the right state.
  std::vector<CallbackStateKey> state_keys() const {
    std::vector<CallbackStateKey> keys;
    std::map<std::string, int, std::less<>> seen;
    for (const auto& callback : callbacks_.all()) {
      const std::string type(callback->type_name());
      keys.emplace_back(&*callback, "callbacks/" + type + "/" + std::to_string(seen[type]++));
    }
    return keys;
  }

 private:
  TrainerCallbacks callbacks_;
  std::vector<ModelCheckpoint> deferred_checkpoints_;
};

}  // namespace volt::detail

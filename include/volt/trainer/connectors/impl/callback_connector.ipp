/// \file
/// Definitions of the functions declared in volt/trainer/connectors/callback_connector.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

#include <optional>

namespace volt::detail {

VOLT_INLINE void CallbackConnector::add_checkpoint(ModelCheckpoint callback) {
  deferred_checkpoints_.push_back(std::move(callback));
}

VOLT_INLINE void CallbackConnector::add_timer(const TrainerOptions& options) {
  if (!options.max_time) return;
  if (callbacks_.count<Timer>() > 0) {
    log::info_rank_zero("Ignoring `Trainer(max_time=...)`, callbacks list already contains a Timer.");
  } else {
    callbacks_.add(Timer(*options.max_time, TimerInterval::step));
  }
}

VOLT_INLINE void CallbackConnector::reorder() {
  for (auto& checkpoint : deferred_checkpoints_) callbacks_.add(std::move(checkpoint));
  deferred_checkpoints_.clear();
}

VOLT_INLINE void CallbackConnector::add_defaults(const TrainerOptions& options) {
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

VOLT_INLINE bool CallbackConnector::is_monitoring(AnyCallback<TrainerState>& callback) {
  return callback.get(typeid(ModelCheckpoint)) != nullptr || callback.get(typeid(EarlyStopping)) != nullptr;
}

VOLT_INLINE void CallbackConnector::run_train_epoch_end(TrainerState& state, bool monitoring) {
  for (auto* callback : callbacks_.with(Hook::on_train_epoch_end)) {
    if (is_monitoring(*callback) != monitoring) continue;
    std::optional<ProfileScope> profiled;  // profiler: as CallbackList::run times every other callback hook
    if (state.profiler_) [[unlikely]] {
      profiled.emplace(state.profiler_, "[Callback]" + profiled_type_name(callback->type_name().data()) +
                                            ".on_train_epoch_end");
    }
    callback->on_train_epoch_end(state);
  }
}

VOLT_INLINE auto CallbackConnector::state_keys(bool mangled) const -> std::vector<CallbackStateKey> {
  std::vector<CallbackStateKey> keys;
  std::map<std::string, int, std::less<>> seen;
  for (const auto& callback : callbacks_.all()) {
    std::string type(callback->type_name());
    if (!mangled) {
      // The readable name ("volt::ModelCheckpoint"), with characters a checkpoint key cannot hold replaced.
      type = c10::demangle(type.c_str());
      for (char& c : type) {
        if (c < 0x20 || c > 0x7e || c == '"' || c == '\'' || c == '\\') c = '_';
      }
    }
    keys.emplace_back(&*callback, "callbacks/" + type + "/" + std::to_string(seen[type]++));
  }
  return keys;
}

}  // namespace volt::detail

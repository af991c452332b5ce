/// \file
/// Definitions of the functions declared in volt/trainer/loops/training_epoch_loop.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE std::string TrainingEpochLoop::batch_context(const TrainerState& state, std::int64_t batch_idx) {
  return "epoch " + std::to_string(state.current_epoch) + ", training batch " + std::to_string(batch_idx) +
         " (global step " + std::to_string(state.global_step) + ")";
}

VOLT_INLINE bool max_steps_reached(const TrainerOptions& options, const TrainerState& state) {
  return options.max_steps >= 0 && state.global_step >= options.max_steps;
}

VOLT_INLINE bool min_training_done(const TrainerOptions& options, const TrainerState& state) {
  const bool epochs_ok = !options.min_epochs || state.current_epoch >= *options.min_epochs;
  const bool steps_ok = !options.min_steps || state.global_step >= *options.min_steps;
  return epochs_ok && steps_ok;
}

VOLT_INLINE void TrainingEpochLoop::reset() {
  limit.reset();
  interrupted = false;
  overfit_order.reset();
  val_loop.overfit_order.reset();
}

VOLT_INLINE bool TrainingEpochLoop::validates_in_epoch(const TrainerOptions& options, const TrainerState& state) {
  const auto every = options.check_val_every_n_epoch;
  return state.has_validation && (!every || (state.current_epoch + 1) % *every == 0);
}

VOLT_INLINE auto TrainingEpochLoop::validation_interval(const TrainerOptions& options, const TrainerState& state) -> std::optional<std::int64_t> {
  if (state.num_training_batches) return batches_for(options.val_check_interval, *state.num_training_batches);
  if (!options.val_check_interval.is_fraction()) return options.val_check_interval.count();
  return std::nullopt;
}

VOLT_INLINE bool TrainingEpochLoop::should_validate(const TrainerOptions& options, const TrainerState& state,
                                                    std::int64_t batch_idx, bool is_last,
                                                    std::optional<std::int64_t> val_check_batch,
                                                    std::int64_t total_batches) {
  if (!state.has_validation) return false;
  const auto every = options.check_val_every_n_epoch;
  if (every && (state.current_epoch + 1) % *every != 0) return false;
  if (state.should_stop && min_training_done(options, state)) return true;
  if (options.check_val_every_n_epoch && options.val_check_interval.is_whole_epoch()) return is_last;
  if (val_check_batch) {
    const auto iteration = options.check_val_every_n_epoch ? batch_idx : total_batches - 1;
    return (iteration + 1) % *val_check_batch == 0;
  }
  return is_last;
}

}  // namespace volt::detail

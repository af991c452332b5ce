/// \file
/// The Trainer options of a tuner's trial fit (the batch-size finder's trials, the learning-rate finder's sweep):
/// what Lightning's Tuner turns off before it fits.
#pragma once

#include <volt/trainer/options.hpp>

#include <cstdint>

namespace volt::detail {

/// `options` for a trial of exactly `steps` optimizer steps: no epoch or step minimum, no sanity check, no
/// checkpoints, progress bar, model summary or logger.
inline void make_trial_options(TrainerOptions& options, std::int64_t steps) {
  options.max_steps = steps;
  options.max_epochs = -1;
  options.min_epochs.reset();
  options.min_steps.reset();
  options.num_sanity_val_steps = 0;
  options.enable_checkpointing = false;
  options.enable_progress_bar = false;
  options.enable_model_summary = false;
  options.logger = false;
}

}  // namespace volt::detail

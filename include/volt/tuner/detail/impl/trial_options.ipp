/// \file
/// Definitions of the functions declared in volt/tuner/detail/trial_options.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE void make_trial_options(TrainerOptions& options, std::int64_t steps) {
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

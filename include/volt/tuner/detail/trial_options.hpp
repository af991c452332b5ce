/// \file
/// The Trainer options of a tuner's trial fit (the batch-size finder's trials, the learning-rate finder's sweep):
/// what Lightning's Tuner turns off before it fits.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/trainer/options.hpp>

#include <cstdint>

namespace volt::detail {

/// `options` for a trial of exactly `steps` optimizer steps: no epoch or step minimum, no sanity check, no
/// checkpoints, progress bar, model summary or logger.
VOLT_INLINE void make_trial_options(TrainerOptions& options, std::int64_t steps);

}  // namespace volt::detail

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/tuner/detail/impl/trial_options.ipp>
#endif

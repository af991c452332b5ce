/// \file
/// The data connector (Lightning's trainer/connectors/data_connector.py): how many batches of each data
/// argument a run uses (the limit_*_batches options, fast_dev_run) and the checks of those sizes before
/// training starts.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/errors.hpp>
#include <volt/core/python_format.hpp>
#include <volt/core/range.hpp>
#include <volt/trainer/options.hpp>
#include <volt/trainer/state.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

namespace volt::detail {

/// fast_dev_run=N (Lightning's _init_debugging_flags): N training steps in one epoch, no sanity check.
VOLT_INLINE void apply_fast_dev_run(TrainerOptions& options);

/// How many batches of data of `total` batches (nullopt: size unknown) a limit allows; nullopt means all.
/// fast_dev_run caps every limit.
VOLT_INLINE std::optional<std::int64_t> batch_limit(const TrainerOptions& options, const BatchAmount& amount,
                                                    std::optional<std::int64_t> total, const char* name);

/// The batch limit of `data` for `amount` (see batch_limit).
template <class Data>
std::optional<std::int64_t> data_limit(const TrainerOptions& options, const BatchAmount& amount, Data& data,
                                       const char* name) {
  return batch_limit(options, amount, size_of(data), name);
}

/// Rounds a fraction-of-epoch interval to batches as Lightning does.
VOLT_INLINE std::int64_t batches_for(const BatchAmount& amount, std::int64_t total);

/// Checks, before training starts, the limits and intervals that depend on the data sizes (Lightning's
/// messages): a fraction that selects no batch, an integer val_check_interval longer than the epoch (refused,
/// as Lightning's fit_loop.setup_data does, whether or not validation data was given, unless
/// limit_val_batches is 0 or check_val_every_n_epoch is unset).
VOLT_INLINE void check_data_sizes(const TrainerOptions& options, const TrainerState& state,
                                  std::optional<std::int64_t> train_size, std::optional<std::int64_t> val_size);

}  // namespace volt::detail

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/trainer/connectors/impl/data_connector.ipp>
#endif

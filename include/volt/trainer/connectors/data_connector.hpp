/// \file
/// The data connector (Lightning's trainer/connectors/data_connector.py): how many batches of each data
/// argument a run uses (the limit_*_batches options, fast_dev_run) and the checks of those sizes before
/// training starts.
#pragma once

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
inline void apply_fast_dev_run(TrainerOptions& options) {
  if (options.fast_dev_run <= 0) return;
  options.max_steps = options.fast_dev_run;
  options.max_epochs = 1;
  options.num_sanity_val_steps = 0;
}

/// How many batches of data of `total` batches (nullopt: size unknown) a limit allows; nullopt means all.
/// fast_dev_run caps every limit.
inline std::optional<std::int64_t> batch_limit(const TrainerOptions& options, const BatchAmount& amount,
                                               std::optional<std::int64_t> total, const char* name) {
  std::optional<std::int64_t> limit;
  if (total) {
    limit = amount.of(*total);
  } else if (amount.is_fraction() && !amount.is_whole_epoch()) {
    throw MisconfigurationError(std::string("A fractional `") + name + "` needs data whose size is known; wrap "
                                "the loader with volt::sized(loader, batches) or pass a batch count.");
  } else if (!amount.is_fraction()) {
    limit = amount.count();
  }
  if (options.fast_dev_run > 0) limit = limit ? std::min(*limit, options.fast_dev_run) : options.fast_dev_run;
  return limit;
}

/// The batch limit of `data` for `amount` (see batch_limit).
template <class Data>
std::optional<std::int64_t> data_limit(const TrainerOptions& options, const BatchAmount& amount, Data& data,
                                       const char* name) {
  return batch_limit(options, amount, size_of(data), name);
}

/// Rounds a fraction-of-epoch interval to batches as Lightning does.
inline std::int64_t batches_for(const BatchAmount& amount, std::int64_t total) {
  if (amount.is_fraction()) return std::max<std::int64_t>(1, static_cast<std::int64_t>(static_cast<double>(total) * amount.fraction()));
  return amount.count();
}

/// Checks, before training starts, the limits and intervals that depend on the data sizes (Lightning's
/// messages): a fraction that selects no batch, an integer val_check_interval longer than the epoch (refused,
/// as Lightning's fit_loop.setup_data does, whether or not validation data was given, unless
/// limit_val_batches is 0 or check_val_every_n_epoch is unset).
inline void check_data_sizes(const TrainerOptions& options, const TrainerState& state,
                             std::optional<std::int64_t> train_size, std::optional<std::int64_t> val_size) {
  auto check_fraction = [](const BatchAmount& amount, std::optional<std::int64_t> size, const char* stage) {
    if (!size || *size == 0 || !amount.is_fraction() || amount.fraction() == 0.0 || amount.of(*size) > 0) return;
    throw MisconfigurationError("You requested to check " + amount.to_string() + " of the `" + stage +
                                "_dataloader` but " + amount.to_string() + " * " + std::to_string(*size) +
                                " < 1. Please increase the `limit_" + stage + "_batches` argument. Try at least `limit_" +
                                stage + "_batches=" + python_float(1.0 / static_cast<double>(*size)) + "`");
  };
  check_fraction(options.limit_train_batches, train_size, "train");
  if (state.has_validation) check_fraction(options.limit_val_batches, val_size, "val");
  const auto& interval = options.val_check_interval;
  const bool validation_allowed = options.limit_val_batches.is_fraction() ? options.limit_val_batches.fraction() > 0.0
                                                                         : options.limit_val_batches.count() > 0;
  if (validation_allowed && state.num_training_batches && options.check_val_every_n_epoch &&
      !interval.is_fraction() && interval.count() > *state.num_training_batches) {
    throw std::invalid_argument(" `val_check_interval` (" + interval.to_string() +
                                ") must be less than or equal to the number of the training batches (" +
                                std::to_string(*state.num_training_batches) +
                                "). If you want to disable validation set `limit_val_batches` to 0.0 instead. If "
                                "you want to validate based on the total training batches, set "
                                "`check_val_every_n_epoch=None`.");
  }
}

}  // namespace volt::detail

/// \file
/// Definitions of the functions declared in volt/trainer/connectors/data_connector.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE bool overfit_enabled(const TrainerOptions& options) {
  const auto& amount = options.overfit_batches;
  return amount.is_fraction() ? amount.fraction() > 0.0 : amount.count() > 0;
}

VOLT_INLINE void apply_fast_dev_run(TrainerOptions& options) {
  if (overfit_enabled(options)) {
    options.limit_train_batches = options.overfit_batches;
    options.limit_val_batches = options.overfit_batches;
  }
  if (options.fast_dev_run <= 0) return;
  options.max_steps = options.fast_dev_run;
  options.max_epochs = 1;
  options.num_sanity_val_steps = 0;
}

VOLT_INLINE std::optional<std::int64_t> batch_limit(const TrainerOptions& options, const BatchAmount& amount,
                                                    std::optional<std::int64_t> total, const char* name) {
  const std::string_view limit_name(name);
  const bool overfit_limit =
      overfit_enabled(options) && (limit_name == "limit_train_batches" || limit_name == "limit_val_batches");
  std::optional<std::int64_t> limit;
  if (total) {
    limit = amount.of(*total);
  } else if (amount.is_fraction() && !amount.is_whole_epoch()) {
    throw MisconfigurationError(std::string("A fractional `") + name + "` needs data whose size is known; wrap "
                                "the loader with volt::sized(loader, batches) or pass a batch count.");
  } else if (!amount.is_fraction()) {
    limit = amount.count();
  }
  if (options.fast_dev_run > 0 && !overfit_limit) {
    limit = limit ? std::min(*limit, options.fast_dev_run) : options.fast_dev_run;
  }
  return limit;
}

VOLT_INLINE std::int64_t batches_for(const BatchAmount& amount, std::int64_t total) {
  if (amount.is_fraction()) return std::max<std::int64_t>(1, static_cast<std::int64_t>(static_cast<double>(total) * amount.fraction()));
  return amount.count();
}

VOLT_INLINE void check_fraction(const BatchAmount& amount, std::optional<std::int64_t> size, const char* stage) {
  if (!size || *size == 0 || !amount.is_fraction() || amount.fraction() == 0.0 || amount.of(*size) > 0) return;
  throw MisconfigurationError("You requested to check " + amount.to_string() + " of the `" + stage +
                              "_dataloader` but " + amount.to_string() + " * " + std::to_string(*size) +
                              " < 1. Please increase the `limit_" + stage + "_batches` argument. Try at least `limit_" +
                              stage + "_batches=" + python_float(1.0 / static_cast<double>(*size)) + "`");
}

VOLT_INLINE void check_data_sizes(const TrainerOptions& options, const TrainerState& state,
                                  std::optional<std::int64_t> train_size, std::optional<std::int64_t> val_size) {
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

VOLT_INLINE void OverfitOrder::reset() {
  state_ = torch::Tensor();
  warned_ = false;
}

}  // namespace volt::detail

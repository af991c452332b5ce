/// \file
/// Definitions of the functions declared in volt/callbacks/model_checkpoint_options.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE CheckpointIntervals check_model_checkpoint_options(const ModelCheckpointOptions& o) {
  if (o.save_top_k < -1) {
    throw MisconfigurationError("Invalid value for save_top_k=" + std::to_string(o.save_top_k) + ". Must be >= -1");
  }
  if (o.every_n_train_steps && *o.every_n_train_steps < 0) {
    throw MisconfigurationError("Invalid value for every_n_train_steps=" + std::to_string(*o.every_n_train_steps) +
                                ". Must be >= 0");
  }
  if (o.every_n_epochs && *o.every_n_epochs < 0) {
    throw MisconfigurationError("Invalid value for every_n_epochs=" + std::to_string(*o.every_n_epochs) +
                                ". Must be >= 0");
  }
  const std::int64_t every_n_train_steps = o.every_n_train_steps.value_or(0);
  const std::int64_t every_n_epochs = o.every_n_epochs.value_or(o.every_n_train_steps || o.train_time_interval ? 0 : 1);
  if ((every_n_train_steps >= 1) + (every_n_epochs >= 1) + o.train_time_interval.has_value() > 1) {
    throw MisconfigurationError("Combination of parameters every_n_train_steps=" +
                                std::to_string(every_n_train_steps) + ", every_n_epochs=" +
                                std::to_string(every_n_epochs) + " and train_time_interval=" +
                                (o.train_time_interval ? o.train_time_interval->to_string() : "None") +
                                " should be mutually exclusive.");
  }
  if (o.mode != "min" && o.mode != "max") {
    throw MisconfigurationError("`mode` can be min, max but got " + o.mode);
  }
  if (o.monitor.empty() && o.save_top_k != -1 && o.save_top_k != 0 && o.save_top_k != 1) {
    throw MisconfigurationError("ModelCheckpoint(save_top_k=" + std::to_string(o.save_top_k) +
                                ", monitor=None) is not a valid configuration. No quantity for top_k to track.");
  }
  return {every_n_train_steps, every_n_epochs};
}

}  // namespace volt::detail

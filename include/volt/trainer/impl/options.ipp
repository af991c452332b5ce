/// \file
/// Definitions of the functions declared in volt/trainer/options.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE void validate(const TrainerOptions& options) {
  auto fail = [](const std::string& message) { throw MisconfigurationError(message); };
  if (options.num_nodes < 1) {
    fail("`num_nodes` must be a positive integer, but got " + std::to_string(options.num_nodes) + ".");
  }
  if (options.max_epochs && *options.max_epochs < -1) {
    fail("`max_epochs` must be a non-negative integer or -1. You passed in " + std::to_string(*options.max_epochs) +
         ".");
  }
  if (options.max_steps < -1) {
    fail("`max_steps` must be a non-negative integer or -1. You passed in " + std::to_string(options.max_steps) + ".");
  }
  if (options.accumulate_grad_batches < 1) {
    fail("`accumulate_grad_batches` must be a positive integer. You passed in " +
         std::to_string(options.accumulate_grad_batches) + ".");
  }
  if (options.gradient_clip_val && (*options.gradient_clip_val < 0 || !std::isfinite(*options.gradient_clip_val))) {
    fail("`gradient_clip_val` must be a finite number >= 0. You passed in " +
         detail::python_float(*options.gradient_clip_val) + ".");
  }
  auto check_limit = [&](const BatchAmount& amount, const char* name) {
    const bool bad = amount.is_fraction() ? !(amount.fraction() >= 0.0 && amount.fraction() <= 1.0)
                                          : amount.count() < 0;
    if (bad) {
      fail("You have passed invalid value " + amount.to_string() + " for " + name +
           ", it has to be in [0.0, 1.0] or an int.");
    }
  };
  check_limit(options.limit_train_batches, "limit_train_batches");
  check_limit(options.limit_val_batches, "limit_val_batches");
  check_limit(options.limit_test_batches, "limit_test_batches");
  check_limit(options.limit_predict_batches, "limit_predict_batches");
  check_limit(options.overfit_batches, "overfit_batches");
  if (options.reload_dataloaders_every_n_epochs < 0) {
    fail("`reload_dataloaders_every_n_epochs` should be an int >= 0, got " +
         std::to_string(options.reload_dataloaders_every_n_epochs) + ".");
  }
  const auto& interval = options.val_check_interval;
  if (interval.is_fraction() && !(interval.fraction() >= 0.0 && interval.fraction() <= 1.0)) {
    fail("`val_check_interval` should be a fraction in [0.0, 1.0] or an int. Got " + interval.to_string() + ".");
  }
  if (!interval.is_fraction() && interval.count() < 1) {
    fail("`val_check_interval` must be a positive number of batches. Got " + interval.to_string() + ".");
  }
  if (!options.check_val_every_n_epoch && interval.is_fraction()) {
    fail("`val_check_interval` should be an integer when `check_val_every_n_epoch=None`.");
  }
  if (options.check_val_every_n_epoch && *options.check_val_every_n_epoch < 1) {
    fail("`check_val_every_n_epoch` should be an integer >= 1 or None. Got " +
         std::to_string(*options.check_val_every_n_epoch) + ".");
  }
  if (options.num_sanity_val_steps < -1) {
    fail("`num_sanity_val_steps` must be -1 (all batches) or >= 0. Got " + std::to_string(options.num_sanity_val_steps) +
         ".");
  }
  if (options.log_every_n_steps < 0) {
    fail("`log_every_n_steps` must be >= 0. Got " + std::to_string(options.log_every_n_steps) + ".");
  }
  if (options.fast_dev_run < 0) {
    fail("fast_dev_run=" + std::to_string(options.fast_dev_run) + " is not a valid configuration. It should be >= 0.");
  }
  if (options.min_epochs && *options.min_epochs < 0) {
    fail("`min_epochs` must be a non-negative integer. You passed in " + std::to_string(*options.min_epochs) + ".");
  }
  if (options.min_steps && *options.min_steps < 0) {
    fail("`min_steps` must be a non-negative integer. You passed in " + std::to_string(*options.min_steps) + ".");
  }
  if (options.min_steps && options.max_steps >= 0 && *options.min_steps > options.max_steps) {
    fail("`min_steps` (" + std::to_string(*options.min_steps) + ") must not exceed `max_steps` (" +
         std::to_string(options.max_steps) + ").");
  }
  if (options.gradient_clip_algorithm != GradClipAlgorithm::norm &&
      options.gradient_clip_algorithm != GradClipAlgorithm::value) {
    fail("`gradient_clip_algorithm` " + std::to_string(static_cast<int>(options.gradient_clip_algorithm)) +
         " is invalid. Allowed algorithms: ['value', 'norm'].");
  }
  if (options.memory_format != MemoryFormat::contiguous && options.memory_format != MemoryFormat::channels_last &&
      options.memory_format != MemoryFormat::automatic) {
    fail("`memory_format` " + std::to_string(static_cast<int>(options.memory_format)) +
         " is invalid. Allowed: volt::MemoryFormat::contiguous, channels_last, automatic.");
  }
  if (options.cuda_graph_warmup_steps < 1) {
    fail("`cuda_graph_warmup_steps` must be >= 1. Got " + std::to_string(options.cuda_graph_warmup_steps) + ".");
  }
  if (options.on_checkpoint_failure != CheckpointFailure::raise &&
      options.on_checkpoint_failure != CheckpointFailure::warn) {
    fail("`on_checkpoint_failure` " + std::to_string(static_cast<int>(options.on_checkpoint_failure)) +
         " is invalid. Allowed: volt::CheckpointFailure::raise, volt::CheckpointFailure::warn.");
  }
  if (!options.default_root_dir.empty()) {
    std::error_code error;
    const std::filesystem::path root(options.default_root_dir);
    if (std::filesystem::exists(root, error) && !std::filesystem::is_directory(root, error)) {
      fail("`default_root_dir` must be a directory, but " + options.default_root_dir + " is an existing file.");
    }
  }
  if (options.min_epochs && options.max_epochs && *options.max_epochs >= 0 && *options.min_epochs > *options.max_epochs) {
    fail("`min_epochs` (" + std::to_string(*options.min_epochs) + ") must not exceed `max_epochs` (" +
         std::to_string(*options.max_epochs) + ").");
  }
}
}  // namespace volt::detail

namespace volt {

VOLT_INLINE std::int64_t BatchAmount::of(std::int64_t total) const {
  if (is_fraction()) return static_cast<std::int64_t>(static_cast<double>(total) * fraction());
  return std::min(total, count());
}

}  // namespace volt

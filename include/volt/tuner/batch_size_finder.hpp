/// \file
/// volt::scale_batch_size and volt::find_batch_size: Lightning's Tuner.scale_batch_size in "power" mode.
///
/// Try a few training steps at a batch size, double it while that works, and stop at the first
/// out-of-memory error; the answer is the largest size that worked.
///
/// ```
/// auto found = volt::scale_batch_size<volt::CUDA, volt::SingleDevice, volt::BF16Autocast>(
///     {.devices = 1}, [] { return std::make_shared<Net>(); },
///     [&](std::int64_t batch_size) { return make_loader(batch_size); });
/// // found.batch_size
/// ```
///
/// The search itself (find_batch_size) takes any function that runs a trial at a batch size, so it can be
/// used without a Trainer, and tested on a CPU with a trial that throws the out-of-memory error past a size.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/compat.hpp>
#include <volt/core/errors.hpp>
#include <volt/core/log.hpp>
#include <volt/strategies/ddp.hpp>
#include <volt/trainer/options.hpp>
#include <volt/trainer/trainer.hpp>
#include <volt/tuner/detail/trial_options.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace volt {

/// Options of the batch-size finder, with Lightning's defaults (Tuner.scale_batch_size).
struct BatchSizeFinderOptions {
  /// "power" only (Lightning's "binsearch" is not implemented); anything else throws MisconfigurationError.
  std::string mode = "power";
  /// Optimizer steps run at each batch size.
  std::int64_t steps_per_trial = 3;
  /// The first batch size tried.
  std::int64_t init_val = 2;
  /// At most this many trials.
  std::int64_t max_trials = 25;
  /// The largest batch size worth trying, e.g. the dataset's length (Lightning stops at the dataset's
  /// length: "The batch size N is greater or equal than the length of your dataset."); nullopt: no bound.
  std::optional<std::int64_t> max_val{};
};

/// One trial of the search.
struct BatchSizeTrial {
  /// The batch size tried.
  std::int64_t batch_size;
  /// false: the trial ran out of memory.
  bool fits;
};

/// What the search found.
struct BatchSizeFinderResult {
  /// The largest batch size whose trial ran (Lightning's return value).
  std::int64_t batch_size = 0;
  /// Every trial, in order.
  std::vector<BatchSizeTrial> trials;
  /// Whether a trial ran out of memory (false: the search stopped at max_trials or max_val first).
  bool hit_out_of_memory = false;
};

/// Lightning's is_oom_error: whether `error` says a device (or the host) ran out of memory.
/// c10::OutOfMemoryError is what the CUDA caching allocator throws in every supported LibTorch (1.13
/// introduced it, as torch.cuda.OutOfMemoryError in Python); the messages cover the allocators that throw
/// a plain c10::Error (MPS: "MPS backend out of memory", CPU: "DefaultCPUAllocator: can't allocate memory"),
/// cuBLAS/cuDNN failing to allocate, and std::bad_alloc.
VOLT_INLINE bool is_oom_error(const std::exception& error);

/// Lightning's garbage_collection_cuda: returns the caching allocators' unused blocks (CUDA, MPS) to the
/// driver, so the next trial starts from what is really in use. No-op without those devices.
VOLT_INLINE void release_cached_device_memory();

/// Lightning's "power" search. Calls `trial(batch_size)` for init_val, 2 init_val, 4 init_val, ...: a trial
/// that returns means the size fits, one that throws an out-of-memory error (is_oom_error) means it does
/// not; device memory is released after every trial. Stops at the first failure after a success (the
/// answer is the size before it), at max_val (clamped to it), or after max_trials. A failure before any
/// success halves the size and goes on. Logs Lightning's lines ("Batch size 4 succeeded, trying batch size
/// 8", "Finished batch size finder, will continue with full run using batch size 64").
/// Throws MisconfigurationError for invalid options, std::runtime_error when even batch size 1 runs out
/// of memory, and rethrows any other exception of `trial`.
template <class Trial>
BatchSizeFinderResult find_batch_size(Trial&& trial, const BatchSizeFinderOptions& options = {}) {
  if (options.mode != "power") {
    throw MisconfigurationError("volt: batch size finder mode `" + options.mode +
                                "` is not supported; the supported mode is `power`");
  }
  if (options.init_val < 1 || options.max_trials < 1 || options.steps_per_trial < 1 ||
      (options.max_val && *options.max_val < 1)) {
    throw MisconfigurationError("volt: the batch size finder needs init_val, max_trials, steps_per_trial (and "
                                "max_val when set) >= 1; got init_val=" + std::to_string(options.init_val) +
                                ", max_trials=" + std::to_string(options.max_trials) +
                                ", steps_per_trial=" + std::to_string(options.steps_per_trial));
  }
  BatchSizeFinderResult result;
  std::int64_t size = options.max_val ? std::min(options.init_val, *options.max_val) : options.init_val;
  bool any_success = false;
  for (std::int64_t attempt = 0; attempt < options.max_trials; ++attempt) {
    release_cached_device_memory();
    bool fits = true;
    try {
      trial(size);
    } catch (const std::exception& error) {
      if (!is_oom_error(error)) throw;
      fits = false;
    }
    release_cached_device_memory();
    result.trials.push_back({size, fits});
    if (fits) {
      result.batch_size = size;
      any_success = true;
      if (attempt + 1 >= options.max_trials) break;
      std::int64_t next = size * 2;
      if (options.max_val && next >= *options.max_val) {
        if (size >= *options.max_val) break;
        log::info_rank_zero("The batch size " + std::to_string(next) +
                            " is greater or equal than the length of your dataset.");
        next = *options.max_val;
      }
      log::info_rank_zero("Batch size " + std::to_string(size) + " succeeded, trying batch size " +
                          std::to_string(next));
      size = next;
      continue;
    }
    result.hit_out_of_memory = true;
    if (any_success) break;
    if (size == 1) {
      throw std::runtime_error("volt: the batch size finder ran out of memory even at batch size 1");
    }
    log::info_rank_zero("Batch size " + std::to_string(size) + " failed, trying batch size " +
                        std::to_string(size / 2));
    size /= 2;
  }
  if (!any_success) {
    throw std::runtime_error("volt: the batch size finder found no batch size that fits in " +
                             std::to_string(options.max_trials) + " trials (last tried " + std::to_string(size) + ")");
  }
  log::info_rank_zero("Finished batch size finder, will continue with full run using batch size " +
                      std::to_string(result.batch_size));
  return result;
}

/// The search with a `Trainer<Accelerator, Strategy, Precision>`: each trial builds a fresh model with
/// `make_model()` and the training data with `make_train_data(batch_size)` (anything Trainer::fit takes, a
/// volt::DataModule too),
/// and fits for options.steps_per_trial optimizer steps with `trainer_options`, minus what a trial does not
/// need (no validation, sanity check, checkpoints, logger, progress bar or model summary). Fresh models
/// leave the caller's model untouched, as Lightning restores the weights after its search.
/// Throws what find_batch_size and the Trainer throw (MisconfigurationError for bad options or devices),
/// and, with volt::DDP, std::invalid_argument with Lightning's message ("Tuning the batch size is currently
/// not supported with distributed strategies."), before any process is started: each rank would search on
/// its own and they would disagree.
template <class Accelerator, class Strategy, class Precision, class MakeModel, class MakeTrainData>
BatchSizeFinderResult scale_batch_size(TrainerOptions trainer_options, MakeModel&& make_model,
                                       MakeTrainData&& make_train_data, const BatchSizeFinderOptions& options = {}) {
  if constexpr (std::is_same_v<Strategy, DDP>) {
    throw std::invalid_argument(
        "Tuning the batch size is currently not supported with distributed strategies. (volt: use "
        "volt::SingleDevice for the search, then train with volt::DDP and the size found.)");
  }
  detail::make_trial_options(trainer_options, options.steps_per_trial);
  trainer_options.limit_val_batches = 0;  // a volt::DataModule's validation data is not needed either
  return find_batch_size(
      [&](std::int64_t batch_size) {
        auto model = make_model();
        auto data = make_train_data(batch_size);
        Trainer<Accelerator, Strategy, Precision> trainer(trainer_options);
        trainer.fit(model, data);
      },
      options);
}

}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/tuner/impl/batch_size_finder.ipp>
#endif

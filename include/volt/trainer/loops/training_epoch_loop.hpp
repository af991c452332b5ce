/// \file
/// The training epoch loop (Lightning's loops/training_epoch_loop.py): one epoch's batches — skipping to the
/// resume point, each batch's step (volt/trainer/loops/cuda_graph_step.hpp over automatic optimization, or
/// volt/trainer/loops/manual_optimization.hpp),
/// validation when val_check_interval says so, the stop checks between batches.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/range.hpp>
#include <volt/trainer/call.hpp>
#include <volt/trainer/connectors/checkpoint_connector.hpp>
#include <volt/trainer/connectors/signal_connector.hpp>
#include <volt/trainer/loops/cuda_graph_step.hpp>
#include <volt/trainer/loops/evaluation_loop.hpp>
#include <volt/trainer/loops/manual_optimization.hpp>
#include <volt/trainer/parts.hpp>

#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <type_traits>

namespace volt::detail {

/// Whether max_steps is reached.
VOLT_INLINE bool max_steps_reached(const TrainerOptions& options, const TrainerState& state);

/// Whether min_epochs and min_steps allow stopping now.
VOLT_INLINE bool min_training_done(const TrainerOptions& options, const TrainerState& state);

/// Runs the batches of one training epoch.
class TrainingEpochLoop {
 public:
  /// Each batch's training step.
  CudaGraphStep step{};
  /// The validation inside fit.
  EvaluationLoop val_loop{};
  /// The training batches an epoch runs (limit_train_batches; nullopt: all).
  std::optional<std::int64_t> limit{};
  /// Set when SIGINT or SIGTERM asked the fit to stop; the epoch then ends at once.
  bool interrupted = false;

  /// Under overfit_batches, the fixed order of a shuffling training loader.
  OverfitOrder overfit_order{};

  /// Before a fit's first epoch.
  void reset();

  /// Lightning's _should_check_val_epoch: whether validation runs in the current epoch.
  static bool validates_in_epoch(const TrainerOptions& options, const TrainerState& state);

  /// The batches of the current epoch; returns how many ran.
  template <class Parts, class M, class TrainData, class ValData>
  std::int64_t run(Parts& parts, M& module, TrainData& train_data, ValData& val_data) {
    constexpr bool has_val_data = !std::is_same_v<std::remove_cvref_t<ValData>, NoData>;
    auto& state = parts.state;
    const auto& options = parts.options;
    auto& resume = parts.checkpoint.resume;
    const bool resuming_mid_epoch = resume.batches_done > 0;
    auto&& range = as_range(train_data);
    std::int64_t batch_idx = 0;
    auto where = [&] {
      return "epoch " + std::to_string(state.current_epoch) + ", training batch " + std::to_string(batch_idx) +
             " (global step " + std::to_string(state.global_step) + ")";
    };
    auto it = [&] {
      try {
        return overfit_order.begin(range, options, "train");
      } catch (...) {
        rethrow_with_context(where());
      }
    }();
    const auto end = std::end(range);
    if (resuming_mid_epoch) {
      try {
        for (; batch_idx < resume.batches_done && it != end; ++batch_idx) ++it;
      } catch (...) {
        rethrow_with_context(where() + " while skipping to the resume point");
      }
      set_cpu_rng_state(resume.rng);
      resume.batches_done = 0;
    }
    const auto val_check_batch = validation_interval(options, state);
    while (it != end && (!limit || batch_idx < *limit)) {
      bool is_last = false;
      try {
        // A reference into the user's container is copied (tensors are shared, not cloned), a prvalue moved.
        auto batch = parts.prepare_batch(*it);
        std::optional<ProfileScope> profiled;  // profiler: the loader's next batch, then the batch's whole step
        if (state.profiler_) [[unlikely]] profiled.emplace(state.profiler_, "[_TrainingEpochLoop].train_dataloader_next");
        ++it;
        if (state.profiler_) [[unlikely]] profiled.emplace(state.profiler_, "run_training_batch");
        is_last = it == end || (limit && batch_idx + 1 >= *limit);
        if constexpr (uses_automatic_optimization<M>()) {
          step.run(parts, module, batch, batch_idx, is_last);
        } else {
          ManualOptimization::run(parts, module, batch, batch_idx);
        }
      } catch (...) {
        rethrow_with_context(where());
      }
      ++total_batch_idx_;
      if constexpr (has_val_data) {
        if (should_validate(options, state, batch_idx, is_last, val_check_batch)) {
          val_loop.run(parts, module, val_data, Stage::fitting);
          parts.agree_on_stop();
          state.phase_ = MetricPhase::train;
          module.train();
        }
      }
      ++batch_idx;
      if (interrupt_signal != 0) {
        interrupted = true;
        return batch_idx;
      }
      if (max_steps_reached(options, state) || (state.should_stop && min_training_done(options, state))) break;
    }
    if (!state.num_training_batches && !limit) state.num_training_batches = batch_idx;
    return batch_idx;
  }

 private:
  /// val_check_interval in batches, when it can be known.
  static std::optional<std::int64_t> validation_interval(const TrainerOptions& options, const TrainerState& state);

  /// Whether validation runs after the batch `batch_idx` (Lightning's _should_check_val_fx).
  bool should_validate(const TrainerOptions& options, const TrainerState& state, std::int64_t batch_idx, bool is_last,
                       std::optional<std::int64_t> val_check_batch) const;

  std::int64_t total_batch_idx_ = 0;
};

}  // namespace volt::detail

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/trainer/loops/impl/training_epoch_loop.ipp>
#endif

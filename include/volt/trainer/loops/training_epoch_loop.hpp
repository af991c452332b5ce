/// \file
/// The training epoch loop (Lightning's loops/training_epoch_loop.py): one epoch's batches — skipping to the
/// resume point, each batch's on_train_batch_start (the model's -1 ends the epoch), its step
/// (volt/trainer/loops/cuda_graph_step.hpp over automatic optimization, or
/// volt/trainer/loops/manual_optimization.hpp), validation when val_check_interval says so, the
/// ReduceLROnPlateau schedulers of interval step, the stop checks between batches.
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

#include <concepts>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

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
    auto& state = parts.state;
    const auto& options = parts.options;
    auto& resume = parts.checkpoint.resume;
    const bool resuming_mid_epoch = resume.batches_done > 0;
    auto&& range = as_range(train_data);
    std::int64_t batch_idx = 0;
    auto where = [&] { return batch_context(state, batch_idx); };
    auto it = [&] {
      try {
        return overfit_order.begin(range, options, "train");
      } catch (...) {
        rethrow_with_context(where());
      }
    }();
    const auto end = std::end(range);
    const auto val_check_batch = validation_interval(options, state);
    bool stop = false;  // finish_batch ended the epoch
    if (resuming_mid_epoch) {
      try {
        for (; batch_idx < resume.batches_done && it != end; ++batch_idx) ++it;
      } catch (...) {
        rethrow_with_context(where() + " while skipping to the resume point");
      }
      set_cpu_rng_state(resume.rng);
      resume.batches_done = 0;
      // Written before the end of the last batch was over: the rest of it, as the uninterrupted run did.
      if (const auto pending = std::exchange(resume.pending, BatchEndPending::none);
          pending != BatchEndPending::none && batch_idx > 0) {
        const bool is_last = it == end || (limit && batch_idx >= *limit);
        stop = !finish_batch(parts, module, val_data, batch_idx - 1, is_last, val_check_batch, pending);
      }
    }
    bool skip_rest = false;
    while (!stop && it != end && (!limit || batch_idx < *limit)) {
      bool is_last = false;
      try {
        // A reference into the user's container is copied (tensors are shared, not cloned), a prvalue moved.
        auto batch = parts.prepare_batch(*it);
        std::optional<ProfileScope> profiled;  // profiler: the loader's next batch, then the batch's step
        if (state.profiler_) [[unlikely]] profiled.emplace(state.profiler_, "[_TrainingEpochLoop].train_dataloader_next");
        ++it;
        profiled.reset();
        is_last = it == end || (limit && batch_idx + 1 >= *limit);
        ++parts.checkpoint.total_batches;
        skip_rest = start_batch(parts, module, batch, batch_idx);
        // profiler: as Lightning's run_training_batch, the step after on_train_batch_start
        if (state.profiler_ && !skip_rest) [[unlikely]] profiled.emplace(state.profiler_, "run_training_batch");
        if (skip_rest) {
          // Lightning marks the batch as the epoch's last one and, with no step, still moves the step-interval
          // schedulers' count; then the epoch ends: no on_train_batch_end, no validation.
          parts.optimization.step_schedulers(SchedulerInterval::step, batch_idx + 1, SchedulerKinds::non_plateau);
        } else if constexpr (uses_automatic_optimization<M>()) {
          step.run(parts, module, batch, batch_idx, is_last);
        } else {
          ManualOptimization::run(parts, module, batch, batch_idx);
        }
      } catch (...) {
        rethrow_with_context(where());
      }
      if (skip_rest) {
        interrupted = interrupt_signal != 0;
        return batch_idx + 1;
      }
      stop = !finish_batch(parts, module, val_data, batch_idx, is_last, val_check_batch);
      ++batch_idx;
    }
    if (interrupted) return batch_idx;
    if (!state.num_training_batches && !limit) state.num_training_batches = batch_idx;
    return batch_idx;
  }

 private:
  /// "epoch E, training batch B (global step S)", what an error in the batch is told with.
  static std::string batch_context(const TrainerState& state, std::int64_t batch_idx);

  /// Before the batch's step (Lightning's advance): the batch index in the state, on_train_batch_start (the
  /// callbacks' with the batch index, then the model's with the batch and its index). True when the model's hook
  /// returned -1: Lightning then skips the rest of the epoch. The model's hook returns void or an integer
  /// (Lightning's Optional[int]: an integer type or std::optional of one).
  template <class Parts, class M, class Batch>
  static bool start_batch(Parts& parts, M& module, const Batch& batch, std::int64_t batch_idx) {
    parts.state.batch_idx = batch_idx;
    parts.callbacks.list().template run<Hook::on_train_batch_start>(parts.state, batch_idx);
    using Call = ModelHook<Hook::on_train_batch_start>;
    using Response = decltype(Call::call(module, parts.context, batch, batch_idx));
    if constexpr (std::is_void_v<Response>) {
      Call::call(module, parts.context, batch, batch_idx);
      return false;
    } else {
      static_assert(requires(const Response& response) {
        { response == -1 } -> std::convertible_to<bool>;
      }, "volt: a model's on_train_batch_start returns void or an integer (return -1 to skip the rest of the "
         "epoch, as in Lightning); this one returns another type");
      return Call::call(module, parts.context, batch, batch_idx) == -1;
    }
  }

  /// What follows the step of batch `batch_idx`: validation when it is due, the ReduceLROnPlateau schedulers of
  /// interval step (after the validation that may log their metric: Lightning's on_advance_end), then the stop
  /// checks; from `from` on (a resume from a checkpoint written during them). False when the epoch ends here
  /// (SIGINT/SIGTERM, max_steps, should_stop).
  template <class Parts, class M, class ValData>
  bool finish_batch(Parts& parts, M& module, ValData& val_data, std::int64_t batch_idx, bool is_last,
                    std::optional<std::int64_t> val_check_batch,
                    BatchEndPending from = BatchEndPending::validation_check) {
    auto& state = parts.state;
    const auto& options = parts.options;
    auto& pending = parts.checkpoint.resume_point.pending;
    pending = BatchEndPending::schedulers;  // a checkpoint written in the hooks of the validation below
    if constexpr (!std::is_same_v<std::remove_cvref_t<ValData>, NoData>) {
      if (from == BatchEndPending::validation_check &&
          should_validate(options, state, batch_idx, is_last, val_check_batch, parts.checkpoint.total_batches)) {
        val_loop.run(parts, module, val_data, Stage::fitting);
        parts.agree_on_stop();
        state.phase_ = MetricPhase::train;
        module.train();
      }
    }
    if ((batch_idx + 1) % state.accumulate_grad_batches == 0 || is_last) {
      parts.optimization.step_schedulers(SchedulerInterval::step, batch_idx + 1, SchedulerKinds::plateau);
    }
    pending = BatchEndPending::none;
    if (interrupt_signal != 0) {
      interrupted = true;
      return false;
    }
    return !max_steps_reached(options, state) && !(state.should_stop && min_training_done(options, state));
  }

  /// val_check_interval in batches, when it can be known.
  static std::optional<std::int64_t> validation_interval(const TrainerOptions& options, const TrainerState& state);

  /// Whether validation runs after the batch `batch_idx` (Lightning's _should_check_val_fx).
  /// `total_batches`: the batches the fit has started, this one included.
  static bool should_validate(const TrainerOptions& options, const TrainerState& state, std::int64_t batch_idx,
                              bool is_last, std::optional<std::int64_t> val_check_batch, std::int64_t total_batches);
};

}  // namespace volt::detail

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/trainer/loops/impl/training_epoch_loop.ipp>
#endif

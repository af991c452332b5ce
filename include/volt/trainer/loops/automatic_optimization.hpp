/// \file
/// Automatic optimization (Lightning's loops/optimization/automatic.py): one training batch's step — the
/// forward pass under the precision's context, accumulation over accumulate_grad_batches, the (scaled)
/// backward pass and the gradient synchronisation, and at the end of an accumulation window unscale ->
/// on_before_optimizer_step -> clipping -> optimizer step (skipped on inf under fp16) -> update, then the work
/// after each optimizer step (global_step, step-interval schedulers) and after on_train_batch_end (the
/// logger flush).
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/log.hpp>
#include <volt/core/python_format.hpp>
#include <volt/optim.hpp>
#include <volt/trainer/call.hpp>
#include <volt/trainer/module.hpp>
#include <volt/trainer/parts.hpp>

#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace volt::detail {

/// Clips the gradients of `optimizer`'s parameters (`value` <= 0: nothing), on the device (no host sync, so
/// also inside a captured step); the coefficient is torch::nn::utils::clip_grad_norm_'s.
VOLT_INLINE void clip_gradients(torch::optim::Optimizer& optimizer, double value, GradClipAlgorithm algorithm);

/// Clips the gradients of `optimizer`'s parameters as the options ask (gradient_clip_val, its algorithm).
VOLT_INLINE void clip_gradients(const TrainerOptions& options, torch::optim::Optimizer& optimizer);

/// Throws when error_on_nonfinite_loss is set and `loss` is NaN or infinite.
VOLT_INLINE void check_finite_loss(const TrainerOptions& options, const TrainerState& state, const torch::Tensor& loss,
                                   std::int64_t batch_idx);

/// The training batch's hooks and steps around the optimization.
struct AutomaticOptimization {
  /// After the step: the resume point moves past the batch, on_train_batch_end (the callbacks' with the
  /// loss and the batch index, then the model's with the loss, the batch and its index), then, when the batch
  /// ended with an optimizer step (`stepped`), the logger flush (Lightning's update_train_step_metrics runs
  /// after on_train_batch_end, so values logged there are in the step's row).
  template <class Parts, class M, class Batch>
  static void end_batch(Parts& parts, M& module, Batch& batch, const torch::Tensor& loss, std::int64_t batch_idx,
                        bool stepped = true) {
    parts.checkpoint.resume_point = {parts.state.current_epoch, batch_idx + 1, false,
                                        BatchEndPending::validation_check};
    parts.callbacks.list().template run<Hook::on_train_batch_end>(parts.state, loss, batch_idx);
    ModelHook<Hook::on_train_batch_end>::call(module, parts.context, loss, std::as_const(batch), batch_idx);
    if (stepped) flush_step_logs(parts);
  }

  /// What follows each optimizer step: the step count, the step-interval schedulers other than
  /// ReduceLROnPlateau (those step after the batch's validation check, TrainingEpochLoop).
  template <class Parts>
  static void after_optimizer_step(Parts& parts) {
    ++parts.state.global_step;
    parts.optimization.step_schedulers(SchedulerInterval::step, parts.state.batch_idx + 1, SchedulerKinds::non_plateau);
  }

  /// The step values reach the loggers every log_every_n_steps optimizer steps.
  template <class Parts>
  static void flush_step_logs(Parts& parts) {
    const auto& state = parts.state;
    const auto every = parts.options.log_every_n_steps;
    if (every > 0 && state.global_step % every == 0) {
      parts.log_metrics(parts.logger.metrics().take_step_values_for_logger(), state.global_step - 1);
    }
  }

  /// One training batch, eagerly, after its on_train_batch_start (TrainingEpochLoop): the step, end_batch.
  /// `is_last`: the epoch's last batch, which ends an accumulation window early.
  template <class Parts, class M, class Batch>
  static void run(Parts& parts, M& module, Batch& batch, std::int64_t batch_idx, bool is_last) {
    auto& state = parts.state;
    auto& callbacks = parts.callbacks.list();
    const std::int64_t k = state.accumulate_grad_batches;
    torch::Tensor loss;
    parts.strategy.sync_buffers(module);
    {
      auto context = parts.precision.forward_context();
      loss = call_training_step(module, batch, batch_idx, parts.context);
    }
    TORCH_CHECK(loss.defined(), "volt: training_step returned an undefined tensor at epoch ", state.current_epoch,
                ", batch ", batch_idx);
    check_finite_loss(parts.options, state, loss, batch_idx);
    torch::optim::Optimizer& optimizer = parts.optimization.optimizer();
    const bool window_start = batch_idx % k == 0;
    const bool step_now = (batch_idx + 1) % k == 0 || is_last;
    torch::Tensor to_backward = k > 1 ? loss / static_cast<double>(k) : loss;
    if (window_start) {
      callbacks.template run<Hook::on_before_zero_grad>(state);
      ModelHook<Hook::on_before_zero_grad>::call(module, parts.context, optimizer);
      optimizer.zero_grad();
    }
    torch::Tensor scaled = parts.precision.pre_backward(to_backward);
    callbacks.template run<Hook::on_before_backward>(state, scaled);
    ModelHook<Hook::on_before_backward>::call(module, parts.context, std::as_const(scaled));
    parts.strategy.prepare_for_backward(step_now);
    scaled.backward();
    if (step_now) parts.strategy.finish_gradient_sync();
    callbacks.template run<Hook::on_after_backward>(state);
    ModelHook<Hook::on_after_backward>::call(module, parts.context);
    if (step_now) {
      const bool stepped = parts.precision.optimizer_step(optimizer, [&] {
        callbacks.template run<Hook::on_before_optimizer_step>(state, optimizer);
        ModelHook<Hook::on_before_optimizer_step>::call(module, parts.context, optimizer);
        clip_gradients(parts.options, optimizer);
      });
      if (!stepped) report_skipped_step(parts, batch_idx);
      after_optimizer_step(parts);
    }
    end_batch(parts, module, batch, loss, batch_idx, step_now);
  }

 private:
  template <class Parts>
  static void report_skipped_step(Parts& parts, std::int64_t batch_idx) {
    using Precision = typename Parts::precision_type;
    if constexpr (requires { parts.precision.scaler()->get_scale(); }) {
      if (parts.precision.scaler() != nullptr) {
        const auto& state = parts.state;
        log::info_rank_zero("volt: global step " + std::to_string(state.global_step) + " (epoch " +
                            std::to_string(state.current_epoch) + ", batch " + std::to_string(batch_idx) +
                            "): gradients overflowed under " + std::string(Precision::name) +
                            "; the grad scaler skipped the optimizer step and lowered its scale to " +
                            python_float(parts.precision.scaler()->get_scale()) + ".");
      }
    }
  }
};

}  // namespace volt::detail

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/trainer/loops/impl/automatic_optimization.ipp>
#endif

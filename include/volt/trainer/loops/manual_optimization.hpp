/// \file
/// Manual optimization (Lightning's loops/optimization/manual.py): a model that declares
/// `static constexpr bool automatic_optimization = false;` steps its optimizers itself in training_step,
/// through StepContext::optimizers(), manual_backward() and clip_gradients(). The loop runs training_step
/// under the precision's context and carries out those calls (detail::ManualStep): the precision's backward and
/// optimizer step, the strategy's gradient reduction, the hooks, one global step per optimizer step. It never
/// accumulates, clips or steps schedulers on its own; the loggers get the batch's values once per batch.
#pragma once

#include <volt/core/errors.hpp>
#include <volt/core/log.hpp>
#include <volt/core/python_format.hpp>
#include <volt/trainer/call.hpp>
#include <volt/trainer/loops/automatic_optimization.hpp>
#include <volt/trainer/manual_optimizer.hpp>
#include <volt/trainer/module.hpp>
#include <volt/trainer/parts.hpp>

#include <torch/torch.h>

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace volt::detail {

/// Carries out what the model asks through the StepContext during a manual-optimization fit.
template <class Parts, class M>
class ManualStep final : public ManualDriver {
 public:
  ManualStep(Parts& parts, M& module) : parts_(parts), module_(module) {
    const auto optimizers = parts.optimization.optimizers();
    for (std::size_t i = 0; i < optimizers.size(); ++i) handles_.emplace_back(*this, *optimizers[i], i);
    auto& slots = parts.optimization.schedulers();
    for (std::size_t i = 0; i < slots.size(); ++i) schedulers_.emplace_back(*this, *slots[i].scheduler, i, slots[i].optimizer);
  }

  std::vector<ManualOptimizer>& optimizers() override { return handles_; }

  std::vector<ManualScheduler>& lr_schedulers() override { return schedulers_; }

  void step_scheduler(std::size_t index) override {
    auto& slot = parts_.optimization.schedulers().at(index);
    slot.scheduler->step();
    ++slot.steps;
  }

  void step_scheduler(std::size_t index, double metric) override {
    auto& slot = parts_.optimization.schedulers().at(index);
    if (slot.plateau == nullptr) {
      throw std::invalid_argument("volt: ctx.lr_schedulers()[" + std::to_string(index) +
                                  "].step(metric): the scheduler is not a volt::optim::ReduceLROnPlateau; call step()");
    }
    slot.plateau->step(metric);
    ++slot.steps;
  }

  void backward(const torch::Tensor& loss) override {
    auto& state = parts_.state;
    auto& callbacks = parts_.callbacks.list();
    TORCH_CHECK(loss.defined(), "volt: ctx.manual_backward() was given an undefined tensor at epoch ",
                state.current_epoch, ", batch ", state.batch_idx);
    torch::Tensor scaled = parts_.precision.pre_backward(loss);
    callbacks.template run<Hook::on_before_backward>(state, scaled);
    ModelHook<Hook::on_before_backward>::call(module_, parts_.context, std::as_const(scaled));
    parts_.strategy.prepare_for_backward(/*sync=*/true);
    scaled.backward();
    parts_.strategy.finish_gradient_sync();
    callbacks.template run<Hook::on_after_backward>(state);
    ModelHook<Hook::on_after_backward>::call(module_, parts_.context);
  }

  bool step(std::size_t index) override {
    auto& state = parts_.state;
    auto& callbacks = parts_.callbacks.list();
    torch::optim::Optimizer& optimizer = handles_.at(index).optimizer();
    const bool stepped = parts_.precision.optimizer_step(optimizer, [&] {
      callbacks.template run<Hook::on_before_optimizer_step>(state, optimizer);
      ModelHook<Hook::on_before_optimizer_step>::call(module_, parts_.context, optimizer);
    });
    if (!stepped) {
      log::info_rank_zero("volt: global step " + std::to_string(state.global_step) + " (epoch " +
                          std::to_string(state.current_epoch) + ", batch " + std::to_string(state.batch_idx) +
                          "): gradients overflowed; the grad scaler skipped the step of optimizer " +
                          std::to_string(index) + ".");
    }
    ++state.global_step;
    return stepped;
  }

  void clip_gradients(torch::optim::Optimizer& optimizer, double value, GradClipAlgorithm algorithm) override {
    if (value <= 0.0) return;
    if constexpr (requires { parts_.precision.scaler()->unscale_(optimizer); }) {
      if (auto* scaler = parts_.precision.scaler();
          scaler != nullptr && scaler->stage(optimizer) == GradScaler::Stage::ready) {
        scaler->unscale_(optimizer);
      }
    }
    detail::clip_gradients(optimizer, value, algorithm);
  }

 private:
  Parts& parts_;
  M& module_;
  std::vector<ManualOptimizer> handles_{};
  std::vector<ManualScheduler> schedulers_{};
};

/// One training batch under manual optimization.
struct ManualOptimization {
  /// At the start of a fit (after configure_optimizers): Lightning's refusals of the Trainer options that
  /// automate what the model now does itself (MisconfigurationError), and the StepContext's driver.
  template <class Parts, class M>
  static void setup(Parts& parts, M& module) {
    const auto& options = parts.options;
    if (options.gradient_clip_val && *options.gradient_clip_val > 0) {
      throw MisconfigurationError(
          "Automatic gradient clipping is not supported for manual optimization. Remove `Trainer(gradient_clip_val=" +
          python_float(*options.gradient_clip_val) + ")` or switch to automatic optimization.");
    }
    if (options.accumulate_grad_batches != 1) {
      throw MisconfigurationError(
          "Automatic gradient accumulation is not supported for manual optimization. Remove "
          "`Trainer(accumulate_grad_batches=" +
          std::to_string(options.accumulate_grad_batches) + ")` or switch to automatic optimization.");
    }
    if (options.cuda_graphs) {
      log::warn_rank_zero("cuda_graphs=true, but the training step cannot be captured: the model uses manual "
                          "optimization (its training_step steps the optimizers itself). Training eagerly.");
    }
    parts.context.manual_driver_ = std::make_shared<ManualStep<Parts, M>>(parts, module);
  }

  /// One training batch, after its on_train_batch_start (TrainingEpochLoop): training_step under the
  /// precision's context (the model steps), on_train_batch_end, then the logger flush every log_every_n_steps
  /// batches.
  template <class Parts, class M, class Batch>
  static void run(Parts& parts, M& module, Batch& batch, std::int64_t batch_idx) {
    auto& state = parts.state;
    torch::Tensor loss;
    parts.strategy.sync_buffers(module);
    {
      auto context = parts.precision.forward_context();
      using Result = decltype(call_training_step(module, batch, batch_idx, parts.context));
      if constexpr (std::is_void_v<Result>) {
        call_training_step(module, batch, batch_idx, parts.context);
      } else {
        static_assert(std::is_convertible_v<Result, torch::Tensor>,
                      "volt: under manual optimization training_step returns void or a torch::Tensor (the loss "
                      "that on_train_batch_end receives)");
        loss = call_training_step(module, batch, batch_idx, parts.context);
      }
    }
    if (loss.defined()) check_finite_loss(parts.options, state, loss, batch_idx);
    auto& optimization = parts.optimization;
    ++optimization.batches_stepped;
    // on_train_batch_end first, then the logger flush (Lightning's update_train_step_metrics follows the hook),
    // counted in batches here: the model's optimizer steps move global_step.
    AutomaticOptimization::end_batch(parts, module, batch, loss.defined() ? loss.detach() : loss, batch_idx,
                                     /*stepped=*/false);
    const auto every = parts.options.log_every_n_steps;
    if (every > 0 && optimization.batches_stepped % every == 0) {
      parts.log_metrics(parts.logger.metrics().take_step_values_for_logger(), optimization.batches_stepped - 1);
    }
  }
};

}  // namespace volt::detail

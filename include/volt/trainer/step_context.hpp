/// \file
/// volt::StepContext: what a model's steps and hooks receive to log metrics and read the Trainer's progress.
///
/// The model needs to inherit from nothing to use it.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/errors.hpp>
#include <volt/trainer/manual_optimizer.hpp>
#include <volt/trainer/options.hpp>
#include <volt/trainer/state.hpp>

#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace volt {

/// The Trainer's handle for a model's steps and hooks: each Trainer owns one and passes it as the `ctx`
/// argument of training_step, validation_step, test_step and predict_step and of the model hooks that take
/// one. Valid for the Trainer's lifetime.
class StepContext {
 public:
  /// Made by the Trainer over its own state; a model never constructs one.
  explicit StepContext(TrainerState& state) : state_(&state) {}

  /// Records a metric (Lightning's `self.log`) in the current phase (training, validation, test).
  /// In training_step (and the training batch hooks) the default is the step value only; in validation/test
  /// steps the default is the epoch mean; in the epoch-level hooks (on_train_epoch_end, on_validation_epoch_end,
  /// on_train_start, ...) the value is an epoch value of the current epoch, and on_step=true or on_epoch=false
  /// there throws volt::MisconfigurationError (Lightning's rule). A tensor stays on the device until read. `value` must hold a single element (else
  /// c10::Error). Under DDP each rank logs its own values; epoch values are combined across ranks at the
  /// epoch's end (a collective), so every rank must log the same names in the same order.
  /// Call it only while the Trainer runs a step or hook (fit, validate, test).
  void log(std::string_view name, const torch::Tensor& value, const LogOptions& options = {});
  /// log() with a number (stored as a float64 tensor on the CPU).
  void log(std::string_view name, double value, const LogOptions& options = {});

  /// Optimizer steps taken so far in this fit (TrainerState::global_step).
  std::int64_t global_step() const { return state_->global_step; }
  /// The epoch being trained, counted from 0.
  std::int64_t current_epoch() const { return state_->current_epoch; }
  /// The device the model runs on (this rank's device under DDP).
  torch::Device device() const { return state_->root_device; }
  /// What the Trainer is doing: fitting, validating, sanity checking, testing, predicting.
  Stage stage() const { return state_->stage; }
  /// Whether this process is global rank 0 (always true without DDP).
  bool is_global_zero() const { return state_->is_global_zero; }
  /// The Trainer's whole state, as callbacks see it.
  TrainerState& trainer() const { return *state_; }

  /// Manual optimization (a model with `static constexpr bool automatic_optimization = false;`): the fit's
  /// optimizers in configure_optimizers' order (Lightning's `self.optimizers()`). Throws
  /// MisconfigurationError outside a manual-optimization fit.
  std::vector<ManualOptimizer>& optimizers() const { return driver("optimizers").optimizers(); }
  /// Manual optimization: optimizer `index` (std::out_of_range past the last one).
  ManualOptimizer& optimizer(std::size_t index = 0) const;
  /// Manual optimization: the fit's LR schedulers in configure_optimizers' order (Lightning's
  /// `self.lr_schedulers()`); the model steps them itself (ManualScheduler::step), the Trainer does not.
  std::vector<ManualScheduler>& lr_schedulers() const { return driver("lr_schedulers").lr_schedulers(); }
  /// Manual optimization: the backward pass of `loss` (Lightning's `self.manual_backward`): scaled by the grad
  /// scaler under volt::FP16Autocast, gradients reduced across ranks under DDP, on_before_backward and
  /// on_after_backward around it.
  void manual_backward(const torch::Tensor& loss) const { driver("manual_backward").backward(loss); }
  /// Manual optimization: clips the gradients of `optimizer`'s parameters (Lightning's `self.clip_gradients`):
  /// `value` <= 0 does nothing; norm: total 2-norm at most `value`; value: each element in [-value, value].
  /// Under a grad scaler the gradients are unscaled first (step() then does not unscale them again).
  void clip_gradients(ManualOptimizer& optimizer, double value, GradClipAlgorithm algorithm = GradClipAlgorithm::norm) const;

  /// \cond
  // Set by the training loop for a manual-optimization fit.
  std::shared_ptr<detail::ManualDriver> manual_driver_{};
  /// \endcond

 private:
  detail::ManualDriver& driver(const char* what) const;

  TrainerState* state_;
};

}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/trainer/impl/step_context.ipp>
#endif

/// \file
/// volt::ManualOptimizer: an optimizer as a model under manual optimization steps it (Lightning's
/// LightningOptimizer), and the interface through which the Trainer carries out what the model asks.
#pragma once

#include <volt/trainer/options.hpp>

#include <torch/torch.h>

#include <cstddef>
#include <vector>

namespace volt {

class ManualOptimizer;
class ManualScheduler;

namespace detail {

/// What manual optimization does on the model's behalf; implemented by the training loop
/// (volt/trainer/loops/manual_optimization.hpp) for the Trainer's strategy and precision.
class ManualDriver {
 public:
  virtual ~ManualDriver() = default;
  /// The optimizers' handles, in configure_optimizers' order.
  virtual std::vector<ManualOptimizer>& optimizers() = 0;
  /// The schedulers' handles, in configure_optimizers' order.
  virtual std::vector<ManualScheduler>& lr_schedulers() = 0;
  /// Steps scheduler `index` and counts the step for checkpoints.
  virtual void step_scheduler(std::size_t index) = 0;
  /// Steps scheduler `index`, a volt::optim::ReduceLROnPlateau, with `metric`.
  virtual void step_scheduler(std::size_t index, double metric) = 0;
  /// The precision's backward pass of `loss` with the strategy's gradient reduction and the hooks around it.
  virtual void backward(const torch::Tensor& loss) = 0;
  /// The precision's optimizer step of optimizer `index`; false when the grad scaler skipped it.
  virtual bool step(std::size_t index) = 0;
  /// Clips the gradients of `optimizer` (unscaled first under a grad scaler).
  virtual void clip_gradients(torch::optim::Optimizer& optimizer, double value, GradClipAlgorithm algorithm) = 0;
};

}  // namespace detail

/// One of the fit's optimizers as a model under manual optimization uses it (Lightning's
/// LightningOptimizer): step() runs the precision's optimizer step (the grad scaler's unscale, skip on inf/NaN
/// and update under volt::FP16Autocast; on_before_optimizer_step before it) and counts one global step, as
/// Lightning counts every optimizer step. Obtained from StepContext::optimizers(); valid during the fit.
class ManualOptimizer {
 public:
  /// Made by the Trainer; a model never constructs one.
  ManualOptimizer(detail::ManualDriver& driver, torch::optim::Optimizer& optimizer, std::size_t index)
      : driver_(&driver), optimizer_(&optimizer), index_(index) {}

  /// One optimizer step through the precision (see the class comment); global_step grows by one whether or
  /// not the grad scaler skipped the update. Returns false when it skipped it (gradients were inf/NaN).
  bool step() { return driver_->step(index_); }
  /// Clears the gradients of this optimizer's parameters (torch::optim::Optimizer::zero_grad; no hook, as in
  /// Lightning's manual optimization).
  void zero_grad() { optimizer_->zero_grad(); }
  /// The LibTorch optimizer (its param_groups, options, state).
  torch::optim::Optimizer& optimizer() const { return *optimizer_; }
  /// The LibTorch optimizer's members.
  torch::optim::Optimizer* operator->() const { return optimizer_; }
  /// Its position in configure_optimizers' order.
  std::size_t index() const { return index_; }

 private:
  detail::ManualDriver* driver_;
  torch::optim::Optimizer* optimizer_;
  std::size_t index_;
};

/// One of the fit's LR schedulers as a model under manual optimization steps it: step() calls the
/// scheduler's step() and counts it, so that checkpoints restore the schedule exactly (LibTorch's schedulers
/// have no state of their own to save). Obtained from StepContext::lr_schedulers(); valid during the fit.
class ManualScheduler {
 public:
  /// Made by the Trainer; a model never constructs one.
  ManualScheduler(detail::ManualDriver& driver, torch::optim::LRScheduler& scheduler, std::size_t index,
                  std::size_t optimizer)
      : driver_(&driver), scheduler_(&scheduler), index_(index), optimizer_(optimizer) {}

  /// One scheduler step (torch::optim::LRScheduler::step), counted for checkpoints.
  void step() { driver_->step_scheduler(index_); }
  /// One step of a volt::optim::ReduceLROnPlateau with the monitored value (std::invalid_argument for another
  /// scheduler).
  void step(double metric) { driver_->step_scheduler(index_, metric); }
  /// The LibTorch scheduler.
  torch::optim::LRScheduler& scheduler() const { return *scheduler_; }
  /// Its position among all schedulers, in configure_optimizers' order.
  std::size_t index() const { return index_; }
  /// The position of its optimizer in configure_optimizers' order.
  std::size_t optimizer_index() const { return optimizer_; }

 private:
  detail::ManualDriver* driver_;
  torch::optim::LRScheduler* scheduler_;
  std::size_t index_;
  std::size_t optimizer_;
};

}  // namespace volt

/// \file
/// LR schedulers that LibTorch's C++ API lacks, with PyTorch's names, arguments and values
/// (torch.optim.lr_scheduler): LambdaLR, LinearLR, CosineAnnealingLR, OneCycleLR, SequentialLR
/// (ReduceLROnPlateau: volt/optim/plateau.hpp).
///
/// Each is a torch::optim::LRScheduler, so it works wherever LibTorch's schedulers do: in a plain LibTorch
/// loop (`scheduler.step()`), with Fabric, and with the Trainer (volt::OptimizerConfig, whose checkpoints
/// count the steps and replay them on resume). Like PyTorch's, and unlike LibTorch's own StepLR, construction
/// sets the learning rates of step 0 and every step() moves one step on, so that after `n` step() calls the
/// rate is PyTorch's after `n` calls. Values come from the closed forms (PyTorch's step() computes some of them
/// recursively: the two agree to rounding, about 1e-15 relative, checked against PyTorch step by step).
#pragma once

#include <volt/core/linkage.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <numbers>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace volt::optim {

/// The common base of volt's schedulers: the base rates (each param group's rate at construction), the step
/// reached, and the rates as a function of the step (`lrs_at`, the closed form).
class Scheduler : public torch::optim::LRScheduler {
 public:
  /// step() calls so far (PyTorch's last_epoch).
  std::int64_t last_epoch() const noexcept { return epoch_; }
  /// Each param group's rate before the scheduler changed it (PyTorch's base_lrs).
  const std::vector<double>& base_lrs() const noexcept { return base_lrs_; }
  /// The rates after `epoch` step() calls, for every param group.
  virtual std::vector<double> lrs_at(std::int64_t epoch) const = 0;
  /// Whether the scheduler has state beyond its step count (then checkpoints save() and load() it instead of
  /// replaying the steps).
  virtual bool has_state() const { return false; }
  /// Writes the state (has_state() schedulers).
  virtual void save(torch::serialize::OutputArchive& /*archive*/) const {}
  /// Reads what save() wrote.
  virtual void load(torch::serialize::InputArchive& /*archive*/) {}
  /// The rates of the optimizer now (PyTorch's get_last_lr()).
  std::vector<double> last_lrs() const;

 protected:
  /// Reads the base rates from `optimizer`'s param groups.
  explicit Scheduler(torch::optim::Optimizer& optimizer);
  /// Sets the rates of step 0 (the derived constructor calls it once its parameters are known).
  void initial_step();
  /// Continues from `epoch` step() calls with `base_lrs` as the base rates, setting that step's rates (a
  /// scheduler rebuilt on resume from what it had saved).
  void restore(std::vector<double> base_lrs, std::int64_t epoch);
  /// Writes `lrs` to the param groups.
  void apply(const std::vector<double>& lrs);
  /// LibTorch's hook of step(): one step on.
  std::vector<double> get_lrs() override { return lrs_at(++epoch_); }
  /// The optimizer's param groups.
  std::vector<torch::optim::OptimizerParamGroup>& groups() const { return optimizer_->param_groups(); }
  /// Checks that `values` has one entry per param group (PyTorch's ValueError for lists of another length).
  void check_per_group(std::size_t count, const char* what) const;

 private:
  friend class SequentialLR;
  torch::optim::Optimizer* optimizer_;
  std::vector<double> base_lrs_{};
  std::int64_t epoch_ = 0;
};

/// PyTorch's LambdaLR: lr = base_lr * lr_lambda(step), one function for every param group or one per group
/// (std::invalid_argument when their number differs from the groups').
class LambdaLR : public Scheduler {
 public:
  /// The rate factor as a function of step() calls so far.
  using Lambda = std::function<double(std::int64_t)>;
  /// One function for every param group.
  LambdaLR(torch::optim::Optimizer& optimizer, Lambda lr_lambda)
      : LambdaLR(optimizer, std::vector<Lambda>(optimizer.param_groups().size(), std::move(lr_lambda))) {}
  /// One function per param group.
  LambdaLR(torch::optim::Optimizer& optimizer, std::vector<Lambda> lr_lambdas);
  /// The rates after `epoch` step() calls.
  std::vector<double> lrs_at(std::int64_t epoch) const override;

 private:
  std::vector<Lambda> lambdas_;
};

/// PyTorch's LinearLR (warm-up): the factor goes linearly from start_factor to end_factor over total_iters
/// steps, then stays. start_factor in (0, 1], end_factor in [0, 1] (std::invalid_argument with PyTorch's
/// messages otherwise).
class LinearLR : public Scheduler {
 public:
  /// Sets the rates of step 0 (base_lr * start_factor).
  LinearLR(torch::optim::Optimizer& optimizer, double start_factor = 1.0 / 3.0, double end_factor = 1.0,
           std::int64_t total_iters = 5);
  /// The rates after `epoch` step() calls.
  std::vector<double> lrs_at(std::int64_t epoch) const override;

 private:
  double start_, end_;
  std::int64_t total_;
};

/// PyTorch's CosineAnnealingLR: eta_min + (base_lr - eta_min) * (1 + cos(pi * step / T_max)) / 2 (periodic past
/// T_max, as PyTorch's). T_max >= 1 (std::invalid_argument otherwise).
class CosineAnnealingLR : public Scheduler {
 public:
  /// Sets the rates of step 0 (the base rates).
  CosineAnnealingLR(torch::optim::Optimizer& optimizer, std::int64_t T_max, double eta_min = 0.0);
  /// The rates after `epoch` step() calls.
  std::vector<double> lrs_at(std::int64_t epoch) const override;

 private:
  std::int64_t t_max_;
  double eta_min_;
};

/// OneCycleLR's arguments (PyTorch's names and defaults).
struct OneCycleOptions {
  /// The peak rate (every param group).
  double max_lr;
  /// The cycle's length in step() calls (steps past it throw std::out_of_range, as PyTorch's ValueError).
  /// Unset: epochs * steps_per_epoch.
  std::optional<std::int64_t> total_steps{};
  /// With steps_per_epoch, the cycle's length when total_steps is unset (e.g. the Trainer's max_epochs).
  std::optional<std::int64_t> epochs{};
  /// With epochs, the cycle's length when total_steps is unset (e.g. the optimizer steps of one epoch).
  std::optional<std::int64_t> steps_per_epoch{};
  /// The share of the cycle spent increasing the rate.
  double pct_start = 0.3;
  /// "cos" or "linear".
  std::string anneal_strategy = "cos";
  /// Cycle the momentum (SGD's and RMSprop's momentum, Adam's and AdamW's beta1) inversely to the rate.
  bool cycle_momentum = true;
  /// The lowest momentum.
  double base_momentum = 0.85;
  /// The highest momentum.
  double max_momentum = 0.95;
  /// initial_lr = max_lr / div_factor.
  double div_factor = 25.0;
  /// min_lr = initial_lr / final_div_factor.
  double final_div_factor = 1e4;
  /// Three phases (up, back down to initial_lr, down to min_lr) instead of two.
  bool three_phase = false;
};

/// PyTorch's OneCycleLR (1cycle policy), stepped once per optimizer step. Throws std::invalid_argument for
/// PyTorch's invalid arguments (neither total_steps nor both epochs and steps_per_epoch, a value that is not
/// positive), and with cycle_momentum for an optimizer that has neither momentum nor betas (Adagrad, LBFGS).
class OneCycleLR : public Scheduler {
 public:
  /// Sets the rates (max_lr / div_factor) and, with cycle_momentum, the momentum (max_momentum) of step 0.
  OneCycleLR(torch::optim::Optimizer& optimizer, OneCycleOptions options);

  /// The rates after `epoch` step() calls.
  std::vector<double> lrs_at(std::int64_t epoch) const override;
  /// The momentum (or beta1) after `epoch` step() calls.
  double momentum_at(std::int64_t epoch) const { return value_at(epoch, /*momentum=*/true); }

 protected:
  /// One step on: the rates and the momentum.
  std::vector<double> get_lrs() override;

 private:
  struct Phase {
    double end_step, start_lr, end_lr, start_momentum, end_momentum;
  };

  double anneal(double start, double end, double pct) const;

  double value_at(std::int64_t epoch, bool momentum) const;

  void set_momentum(std::int64_t epoch);

  OneCycleOptions o_;
  /// total_steps, or epochs * steps_per_epoch.
  std::int64_t total_steps_ = 0;
  std::vector<Phase> phases_{};
};

/// PyTorch's SequentialLR: `schedulers[0]` until `milestones[0]` steps, then `schedulers[1]` restarted from
/// its step 0, and so on. Every scheduler must be a volt::optim scheduler over `optimizer`; they share the first
/// one's base rates (PyTorch's initial_lr). std::invalid_argument with PyTorch's messages for a scheduler list
/// and milestones that do not fit.
class SequentialLR : public Scheduler {
 public:
  /// Sets the rates of the first scheduler's step 0; `milestones`: the step() counts at which the next
  /// scheduler takes over (one fewer than the schedulers, increasing).
  SequentialLR(torch::optim::Optimizer& optimizer, std::vector<std::shared_ptr<Scheduler>> schedulers,
               std::vector<std::int64_t> milestones);
  /// The rates after `epoch` step() calls.
  std::vector<double> lrs_at(std::int64_t epoch) const override;

 private:
  std::vector<std::shared_ptr<Scheduler>> schedulers_;
  std::vector<std::int64_t> milestones_;
};

}  // namespace volt::optim

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/optim/impl/schedulers.ipp>
#endif

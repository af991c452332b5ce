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

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <numbers>
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
  std::vector<double> last_lrs() const {
    std::vector<double> lrs;
    for (const auto& group : optimizer_->param_groups()) lrs.push_back(group.options().get_lr());
    return lrs;
  }

 protected:
  /// Reads the base rates from `optimizer`'s param groups.
  explicit Scheduler(torch::optim::Optimizer& optimizer) : LRScheduler(optimizer), optimizer_(&optimizer) {
    for (const auto& group : optimizer.param_groups()) base_lrs_.push_back(group.options().get_lr());
  }
  /// Sets the rates of step 0 (the derived constructor calls it once its parameters are known).
  void initial_step() {
    epoch_ = 0;
    apply(lrs_at(0));
  }
  /// Continues from `epoch` step() calls with `base_lrs` as the base rates, setting that step's rates (a
  /// scheduler rebuilt on resume from what it had saved).
  void restore(std::vector<double> base_lrs, std::int64_t epoch) {
    base_lrs_ = std::move(base_lrs);
    epoch_ = epoch;
    apply(lrs_at(epoch));
  }
  /// Writes `lrs` to the param groups.
  void apply(const std::vector<double>& lrs) {
    auto& groups = optimizer_->param_groups();
    for (std::size_t i = 0; i < groups.size() && i < lrs.size(); ++i) groups[i].options().set_lr(lrs[i]);
  }
  /// LibTorch's hook of step(): one step on.
  std::vector<double> get_lrs() override { return lrs_at(++epoch_); }
  /// The optimizer's param groups.
  std::vector<torch::optim::OptimizerParamGroup>& groups() const { return optimizer_->param_groups(); }
  /// Checks that `values` has one entry per param group (PyTorch's ValueError for lists of another length).
  void check_per_group(std::size_t count, const char* what) const {
    if (count != base_lrs_.size()) {
      throw std::invalid_argument("Expected " + std::to_string(base_lrs_.size()) + " " + what + ", but got " +
                                  std::to_string(count));
    }
  }

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
  LambdaLR(torch::optim::Optimizer& optimizer, std::vector<Lambda> lr_lambdas)
      : Scheduler(optimizer), lambdas_(std::move(lr_lambdas)) {
    check_per_group(lambdas_.size(), "lr_lambdas");
    initial_step();
  }
  /// The rates after `epoch` step() calls.
  std::vector<double> lrs_at(std::int64_t epoch) const override {
    std::vector<double> lrs;
    for (std::size_t i = 0; i < base_lrs().size(); ++i) lrs.push_back(base_lrs()[i] * lambdas_[i](epoch));
    return lrs;
  }

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
           std::int64_t total_iters = 5)
      : Scheduler(optimizer), start_(start_factor), end_(end_factor), total_(total_iters) {
    if (start_factor > 1.0 || start_factor <= 0.0) {
      throw std::invalid_argument(
          "Starting multiplicative factor expected to be greater than 0 and less or equal to 1.");
    }
    if (end_factor > 1.0 || end_factor < 0.0) {
      throw std::invalid_argument("Ending multiplicative factor expected to be between 0 and 1.");
    }
    if (total_iters < 1) throw std::invalid_argument("LinearLR: total_iters must be >= 1, got " + std::to_string(total_iters));
    initial_step();
  }
  /// The rates after `epoch` step() calls.
  std::vector<double> lrs_at(std::int64_t epoch) const override {
    const double progress = static_cast<double>(std::min(total_, epoch)) / static_cast<double>(total_);
    const double factor = start_ + (end_ - start_) * progress;
    std::vector<double> lrs;
    for (double base : base_lrs()) lrs.push_back(base * factor);
    return lrs;
  }

 private:
  double start_, end_;
  std::int64_t total_;
};

/// PyTorch's CosineAnnealingLR: eta_min + (base_lr - eta_min) * (1 + cos(pi * step / T_max)) / 2 (periodic past
/// T_max, as PyTorch's). T_max >= 1 (std::invalid_argument otherwise).
class CosineAnnealingLR : public Scheduler {
 public:
  /// Sets the rates of step 0 (the base rates).
  CosineAnnealingLR(torch::optim::Optimizer& optimizer, std::int64_t T_max, double eta_min = 0.0)
      : Scheduler(optimizer), t_max_(T_max), eta_min_(eta_min) {
    if (T_max < 1) throw std::invalid_argument("CosineAnnealingLR: T_max must be >= 1, got " + std::to_string(T_max));
    initial_step();
  }
  /// The rates after `epoch` step() calls.
  std::vector<double> lrs_at(std::int64_t epoch) const override {
    const double cosine = std::cos(std::numbers::pi * static_cast<double>(epoch) / static_cast<double>(t_max_));
    std::vector<double> lrs;
    for (double base : base_lrs()) lrs.push_back(eta_min_ + (base - eta_min_) * (1.0 + cosine) / 2.0);
    return lrs;
  }

 private:
  std::int64_t t_max_;
  double eta_min_;
};

/// OneCycleLR's arguments (PyTorch's names and defaults).
struct OneCycleOptions {
  /// The peak rate (every param group).
  double max_lr;
  /// The cycle's length in step() calls (steps past it throw std::out_of_range, as PyTorch's ValueError).
  std::int64_t total_steps;
  /// The share of the cycle spent increasing the rate.
  double pct_start = 0.3;
  /// "cos" or "linear".
  std::string anneal_strategy = "cos";
  /// Cycle the momentum (SGD's momentum, Adam's and AdamW's beta1) inversely to the rate.
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
/// PyTorch's invalid arguments, and with cycle_momentum for an optimizer other than SGD, Adam or AdamW.
class OneCycleLR : public Scheduler {
 public:
  /// Sets the rates (max_lr / div_factor) and, with cycle_momentum, the momentum (max_momentum) of step 0.
  OneCycleLR(torch::optim::Optimizer& optimizer, OneCycleOptions options) : Scheduler(optimizer), o_(std::move(options)) {
    if (o_.total_steps <= 0) {
      throw std::invalid_argument("Expected positive integer total_steps, but got " + std::to_string(o_.total_steps));
    }
    if (o_.pct_start < 0 || o_.pct_start > 1) {
      throw std::invalid_argument("Expected float between 0 and 1 pct_start, but got " + std::to_string(o_.pct_start));
    }
    if (o_.anneal_strategy != "cos" && o_.anneal_strategy != "linear") {
      throw std::invalid_argument("anneal_strategy must be one of 'cos' or 'linear', instead got " + o_.anneal_strategy);
    }
    const double total = static_cast<double>(o_.total_steps);
    const double initial = o_.max_lr / o_.div_factor;
    const double min_lr = initial / o_.final_div_factor;
    if (o_.three_phase) {
      phases_ = {{o_.pct_start * total - 1, initial, o_.max_lr, o_.max_momentum, o_.base_momentum},
                 {2 * o_.pct_start * total - 2, o_.max_lr, initial, o_.base_momentum, o_.max_momentum},
                 {total - 1, initial, min_lr, o_.max_momentum, o_.max_momentum}};
    } else {
      phases_ = {{o_.pct_start * total - 1, initial, o_.max_lr, o_.max_momentum, o_.base_momentum},
                 {total - 1, o_.max_lr, min_lr, o_.base_momentum, o_.max_momentum}};
    }
    if (o_.cycle_momentum) {
      for (auto& group : groups()) {
        auto& options = group.options();
        if (dynamic_cast<torch::optim::SGDOptions*>(&options) == nullptr &&
            dynamic_cast<torch::optim::AdamOptions*>(&options) == nullptr &&
            dynamic_cast<torch::optim::AdamWOptions*>(&options) == nullptr) {
          throw std::invalid_argument(
              "optimizer must support momentum or beta1 with `cycle_momentum` option enabled (volt: SGD, Adam, AdamW)");
        }
      }
    }
    initial_step();
    set_momentum(0);
  }

  /// The rates after `epoch` step() calls.
  std::vector<double> lrs_at(std::int64_t epoch) const override {
    if (epoch > o_.total_steps) {
      throw std::out_of_range("Tried to step " + std::to_string(epoch) + " times. The specified number of total steps is " +
                              std::to_string(o_.total_steps));
    }
    return std::vector<double>(base_lrs().size(), value_at(epoch, /*momentum=*/false));
  }
  /// The momentum (or beta1) after `epoch` step() calls.
  double momentum_at(std::int64_t epoch) const { return value_at(epoch, /*momentum=*/true); }

 protected:
  /// One step on: the rates and the momentum.
  std::vector<double> get_lrs() override {
    auto lrs = Scheduler::get_lrs();
    set_momentum(last_epoch());
    return lrs;
  }

 private:
  struct Phase {
    double end_step, start_lr, end_lr, start_momentum, end_momentum;
  };

  double anneal(double start, double end, double pct) const {
    if (o_.anneal_strategy == "cos") return end + (start - end) / 2.0 * (std::cos(std::numbers::pi * pct) + 1.0);
    return (end - start) * pct + start;
  }

  double value_at(std::int64_t epoch, bool momentum) const {
    const double step = static_cast<double>(epoch);
    double start_step = 0;
    for (std::size_t i = 0; i < phases_.size(); ++i) {
      const auto& phase = phases_[i];
      if (step <= phase.end_step || i + 1 == phases_.size()) {
        const double pct = (step - start_step) / (phase.end_step - start_step);
        return momentum ? anneal(phase.start_momentum, phase.end_momentum, pct) : anneal(phase.start_lr, phase.end_lr, pct);
      }
      start_step = phase.end_step;
    }
    return 0.0;  // not reached: the last phase always answers
  }

  void set_momentum(std::int64_t epoch) {
    if (!o_.cycle_momentum) return;
    const double momentum = momentum_at(epoch);
    for (auto& group : groups()) {
      auto& options = group.options();
      if (auto* sgd = dynamic_cast<torch::optim::SGDOptions*>(&options)) {
        sgd->momentum(momentum);
      } else if (auto* adam = dynamic_cast<torch::optim::AdamOptions*>(&options)) {
        adam->betas({momentum, std::get<1>(adam->betas())});
      } else if (auto* adamw = dynamic_cast<torch::optim::AdamWOptions*>(&options)) {
        adamw->betas({momentum, std::get<1>(adamw->betas())});
      }
    }
  }

  OneCycleOptions o_;
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
               std::vector<std::int64_t> milestones)
      : Scheduler(optimizer), schedulers_(std::move(schedulers)), milestones_(std::move(milestones)) {
    if (schedulers_.empty()) {
      throw std::invalid_argument("SequentialLR expects at least one scheduler, but got no scheduler.");
    }
    for (std::size_t i = 0; i < schedulers_.size(); ++i) {
      if (!schedulers_[i]) {
        throw std::invalid_argument("SequentialLR: the scheduler at index " + std::to_string(i) + " is null.");
      }
      if (schedulers_[i]->optimizer_ != &optimizer) {
        throw std::invalid_argument("SequentialLR expects all schedulers to belong to the same optimizer, but got the "
                                    "scheduler at index " + std::to_string(i) + " over another optimizer.");
      }
    }
    if (milestones_.size() != schedulers_.size() - 1) {
      throw std::invalid_argument("Sequential Schedulers expects number of schedulers provided to be one more than the "
                                  "number of milestone points, but got number of schedulers " +
                                  std::to_string(schedulers_.size()) + " and the number of milestones to be equal to " +
                                  std::to_string(milestones_.size()));
    }
    // PyTorch's schedulers share the param groups' initial_lr: the rates before the first one changed them.
    for (auto& scheduler : schedulers_) scheduler->base_lrs_ = schedulers_.front()->base_lrs_;
    base_lrs_ = schedulers_.front()->base_lrs_;
    initial_step();
  }
  /// The rates after `epoch` step() calls.
  std::vector<double> lrs_at(std::int64_t epoch) const override {
    const auto index = static_cast<std::size_t>(std::upper_bound(milestones_.begin(), milestones_.end(), epoch) -
                                                milestones_.begin());
    const std::int64_t start = index == 0 ? 0 : milestones_[index - 1];
    return schedulers_[index]->lrs_at(epoch - start);
  }

 private:
  std::vector<std::shared_ptr<Scheduler>> schedulers_;
  std::vector<std::int64_t> milestones_;
};

}  // namespace volt::optim

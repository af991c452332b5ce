/// \file
/// Definitions of the functions declared in volt/optim/schedulers.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::optim {

VOLT_INLINE auto Scheduler::last_lrs() const -> std::vector<double> {
  std::vector<double> lrs;
  for (const auto& group : optimizer_->param_groups()) lrs.push_back(group.options().get_lr());
  return lrs;
}

VOLT_INLINE Scheduler::Scheduler(torch::optim::Optimizer& optimizer)
    : LRScheduler(optimizer), optimizer_(&optimizer) {
  for (const auto& group : optimizer.param_groups()) base_lrs_.push_back(group.options().get_lr());
}

VOLT_INLINE void Scheduler::initial_step() {
  epoch_ = 0;
  apply(lrs_at(0));
}

VOLT_INLINE void Scheduler::restore(std::vector<double> base_lrs, std::int64_t epoch) {
  base_lrs_ = std::move(base_lrs);
  epoch_ = epoch;
  apply(lrs_at(epoch));
}

VOLT_INLINE void Scheduler::apply(const std::vector<double>& lrs) {
  auto& groups = optimizer_->param_groups();
  for (std::size_t i = 0; i < groups.size() && i < lrs.size(); ++i) groups[i].options().set_lr(lrs[i]);
}

VOLT_INLINE void Scheduler::check_per_group(std::size_t count, const char* what) const {
  if (count != base_lrs_.size()) {
    throw std::invalid_argument("Expected " + std::to_string(base_lrs_.size()) + " " + what + ", but got " +
                                std::to_string(count));
  }
}

VOLT_INLINE LambdaLR::LambdaLR(torch::optim::Optimizer& optimizer, std::vector<Lambda> lr_lambdas)
    : Scheduler(optimizer), lambdas_(std::move(lr_lambdas)) {
  check_per_group(lambdas_.size(), "lr_lambdas");
  initial_step();
}

VOLT_INLINE auto LambdaLR::lrs_at(std::int64_t epoch) const -> std::vector<double> {
  std::vector<double> lrs;
  for (std::size_t i = 0; i < base_lrs().size(); ++i) lrs.push_back(base_lrs()[i] * lambdas_[i](epoch));
  return lrs;
}

VOLT_INLINE LinearLR::LinearLR(torch::optim::Optimizer& optimizer, double start_factor, double end_factor,
                               std::int64_t total_iters)
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

VOLT_INLINE auto LinearLR::lrs_at(std::int64_t epoch) const -> std::vector<double> {
  const double progress = static_cast<double>(std::min(total_, epoch)) / static_cast<double>(total_);
  const double factor = start_ + (end_ - start_) * progress;
  std::vector<double> lrs;
  for (double base : base_lrs()) lrs.push_back(base * factor);
  return lrs;
}

VOLT_INLINE CosineAnnealingLR::CosineAnnealingLR(torch::optim::Optimizer& optimizer, std::int64_t T_max,
                                                 double eta_min)
    : Scheduler(optimizer), t_max_(T_max), eta_min_(eta_min) {
  if (T_max < 1) throw std::invalid_argument("CosineAnnealingLR: T_max must be >= 1, got " + std::to_string(T_max));
  initial_step();
}

VOLT_INLINE auto CosineAnnealingLR::lrs_at(std::int64_t epoch) const -> std::vector<double> {
  const double cosine = std::cos(std::numbers::pi * static_cast<double>(epoch) / static_cast<double>(t_max_));
  std::vector<double> lrs;
  for (double base : base_lrs()) lrs.push_back(eta_min_ + (base - eta_min_) * (1.0 + cosine) / 2.0);
  return lrs;
}

VOLT_INLINE OneCycleLR::OneCycleLR(torch::optim::Optimizer& optimizer, OneCycleOptions options)
    : Scheduler(optimizer), o_(std::move(options)) {
  if (o_.total_steps) {
    if (*o_.total_steps <= 0) {
      throw std::invalid_argument("Expected positive integer total_steps, but got " + std::to_string(*o_.total_steps));
    }
    total_steps_ = *o_.total_steps;
  } else if (o_.epochs && o_.steps_per_epoch) {
    if (*o_.epochs <= 0) throw std::invalid_argument("Expected positive integer epochs, but got " + std::to_string(*o_.epochs));
    if (*o_.steps_per_epoch <= 0) {
      throw std::invalid_argument("Expected positive integer steps_per_epoch, but got " +
                                  std::to_string(*o_.steps_per_epoch));
    }
    total_steps_ = *o_.epochs * *o_.steps_per_epoch;
  } else {
    throw std::invalid_argument("You must define either total_steps OR (epochs AND steps_per_epoch)");
  }
  if (o_.pct_start < 0 || o_.pct_start > 1) {
    throw std::invalid_argument("Expected float between 0 and 1 pct_start, but got " + std::to_string(o_.pct_start));
  }
  if (o_.anneal_strategy != "cos" && o_.anneal_strategy != "linear") {
    throw std::invalid_argument("anneal_strategy must be one of 'cos' or 'linear', instead got " + o_.anneal_strategy);
  }
  const double total = static_cast<double>(total_steps_);
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
          dynamic_cast<torch::optim::RMSpropOptions*>(&options) == nullptr &&
          dynamic_cast<torch::optim::AdamOptions*>(&options) == nullptr &&
          dynamic_cast<torch::optim::AdamWOptions*>(&options) == nullptr) {
        throw std::invalid_argument("optimizer must support momentum or beta1 with `cycle_momentum` option enabled");
      }
    }
  }
  initial_step();
  set_momentum(0);
}

VOLT_INLINE auto OneCycleLR::lrs_at(std::int64_t epoch) const -> std::vector<double> {
  if (epoch > total_steps_) {
    throw std::out_of_range("Tried to step " + std::to_string(epoch) + " times. The specified number of total steps is " +
                            std::to_string(total_steps_));
  }
  return std::vector<double>(base_lrs().size(), value_at(epoch, /*momentum=*/false));
}

VOLT_INLINE auto OneCycleLR::get_lrs() -> std::vector<double> {
  auto lrs = Scheduler::get_lrs();
  set_momentum(last_epoch());
  return lrs;
}

VOLT_INLINE double OneCycleLR::anneal(double start, double end, double pct) const {
  if (o_.anneal_strategy == "cos") return end + (start - end) / 2.0 * (std::cos(std::numbers::pi * pct) + 1.0);
  return (end - start) * pct + start;
}

VOLT_INLINE double OneCycleLR::value_at(std::int64_t epoch, bool momentum) const {
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

VOLT_INLINE void OneCycleLR::set_momentum(std::int64_t epoch) {
  if (!o_.cycle_momentum) return;
  const double momentum = momentum_at(epoch);
  for (auto& group : groups()) {
    auto& options = group.options();
    if (auto* sgd = dynamic_cast<torch::optim::SGDOptions*>(&options)) {
      sgd->momentum(momentum);
    } else if (auto* rmsprop = dynamic_cast<torch::optim::RMSpropOptions*>(&options)) {
      rmsprop->momentum(momentum);
    } else if (auto* adam = dynamic_cast<torch::optim::AdamOptions*>(&options)) {
      adam->betas({momentum, std::get<1>(adam->betas())});
    } else if (auto* adamw = dynamic_cast<torch::optim::AdamWOptions*>(&options)) {
      adamw->betas({momentum, std::get<1>(adamw->betas())});
    }
  }
}

VOLT_INLINE SequentialLR::SequentialLR(torch::optim::Optimizer& optimizer,
                                       std::vector<std::shared_ptr<Scheduler>> schedulers,
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

VOLT_INLINE auto SequentialLR::lrs_at(std::int64_t epoch) const -> std::vector<double> {
  const auto index = static_cast<std::size_t>(std::upper_bound(milestones_.begin(), milestones_.end(), epoch) -
                                              milestones_.begin());
  const std::int64_t start = index == 0 ? 0 : milestones_[index - 1];
  return schedulers_[index]->lrs_at(epoch - start);
}

}  // namespace volt::optim

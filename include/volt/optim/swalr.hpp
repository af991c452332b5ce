/// \file
/// volt::optim::SWALR: PyTorch's torch.optim.swa_utils.SWALR, the schedule of Stochastic Weight Averaging.
#pragma once

#include <volt/optim/schedulers.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <stdexcept>
#include <string>
#include <vector>

namespace volt::optim {

/// PyTorch's SWALR: anneals each param group's rate from its rate at construction to its SWA rate over
/// `anneal_epochs` step() calls, by a cosine (`"cos"`) or a straight line (`"linear"`), then keeps the SWA rate.
/// After `k` step() calls the rate is `swa_lr * a + base_lr * (1 - a)` with
/// `a = f(min(1, k / max(1, anneal_epochs)))`, f(t) = (1 - cos(pi t)) / 2 or t (anneal_epochs 0: the SWA rate
/// from construction on).
/// PyTorch computes the same value step by step from the group's current rate; the two agree to rounding.
class SWALR : public Scheduler {
 public:
  /// One SWA rate for every param group, or one per group. Throws std::invalid_argument with PyTorch's
  /// messages for another strategy, a negative anneal_epochs, or a number of rates other than 1 or the groups'.
  SWALR(torch::optim::Optimizer& optimizer, std::vector<double> swa_lrs, std::int64_t anneal_epochs = 10,
        const std::string& anneal_strategy = "cos")
      : Scheduler(optimizer), anneal_epochs_(anneal_epochs), cosine_(anneal_strategy == "cos") {
    if (swa_lrs.size() == 1) swa_lrs.resize(base_lrs().size(), swa_lrs.front());
    if (swa_lrs.size() != base_lrs().size()) {
      throw std::invalid_argument("swa_lr must have the same length as optimizer.param_groups. swa_lr has " +
                                  std::to_string(swa_lrs.size()) + " values, param_groups has " +
                                  std::to_string(base_lrs().size()) + ".");
    }
    check_strategy(anneal_strategy);
    check_anneal_epochs(anneal_epochs);
    swa_lrs_ = std::move(swa_lrs);
    initial_step();
  }

  /// PyTorch's check of anneal_strategy.
  static void check_strategy(const std::string& anneal_strategy) {
    if (anneal_strategy != "cos" && anneal_strategy != "linear") {
      throw std::invalid_argument("anneal_strategy must by one of 'cos' or 'linear', instead got " + anneal_strategy);
    }
  }
  /// PyTorch's check of anneal_epochs.
  static void check_anneal_epochs(std::int64_t anneal_epochs) {
    if (anneal_epochs < 0) {
      throw std::invalid_argument("anneal_epochs must be equal or greater than 0, got " + std::to_string(anneal_epochs));
    }
  }

  /// The rates after `epoch` step() calls.
  std::vector<double> lrs_at(std::int64_t epoch) const override {
    const std::int64_t step = anneal_epochs_ == 0 ? std::max<std::int64_t>(1, epoch) : epoch;
    const double t = std::clamp(static_cast<double>(step) / static_cast<double>(std::max<std::int64_t>(1, anneal_epochs_)),
                                0.0, 1.0);
    const double alpha = cosine_ ? (1.0 - std::cos(std::numbers::pi * t)) / 2.0 : t;
    std::vector<double> lrs;
    for (std::size_t i = 0; i < base_lrs().size(); ++i) {
      lrs.push_back(alpha == 1.0 ? swa_lrs_[i] : swa_lrs_[i] * alpha + base_lrs()[i] * (1.0 - alpha));
    }
    return lrs;
  }

  /// The SWA rate of each param group.
  const std::vector<double>& swa_lrs() const noexcept { return swa_lrs_; }

  /// Continues a schedule that started with `base_lrs` and has taken `epoch` steps (StochasticWeightAveraging
  /// rebuilds its scheduler with it on resume), setting that step's rates.
  void resume(std::vector<double> base_lrs, std::int64_t epoch) {
    check_per_group(base_lrs.size(), "base_lrs");
    restore(std::move(base_lrs), epoch);
  }

 private:
  std::int64_t anneal_epochs_;
  bool cosine_;
  std::vector<double> swa_lrs_{};
};

}  // namespace volt::optim

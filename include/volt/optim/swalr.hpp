/// \file
/// volt::optim::SWALR: PyTorch's torch.optim.swa_utils.SWALR, the schedule of Stochastic Weight Averaging.
#pragma once

#include <volt/core/linkage.hpp>
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
        const std::string& anneal_strategy = "cos");

  /// PyTorch's check of anneal_strategy.
  static void check_strategy(const std::string& anneal_strategy);
  /// PyTorch's check of anneal_epochs.
  static void check_anneal_epochs(std::int64_t anneal_epochs);

  /// The rates after `epoch` step() calls.
  std::vector<double> lrs_at(std::int64_t epoch) const override;

  /// The SWA rate of each param group.
  const std::vector<double>& swa_lrs() const noexcept { return swa_lrs_; }

  /// Continues a schedule that started with `base_lrs` and has taken `epoch` steps (StochasticWeightAveraging
  /// rebuilds its scheduler with it on resume), setting that step's rates.
  void resume(std::vector<double> base_lrs, std::int64_t epoch);

 private:
  std::int64_t anneal_epochs_;
  bool cosine_;
  std::vector<double> swa_lrs_{};
};

}  // namespace volt::optim

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/optim/impl/swalr.ipp>
#endif

/// \file
/// PyTorch's ReduceLROnPlateau as a volt::optim scheduler: the rates drop when a monitored metric stops
/// improving. The same on every LibTorch version (LibTorch 2.x's torch::optim::ReduceLROnPlateauScheduler is not
/// an LRScheduler and has no state to checkpoint; 1.13 has none).
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/optim/schedulers.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace volt::optim {

/// ReduceLROnPlateau's arguments (PyTorch's names and defaults).
struct ReduceLROnPlateauOptions {
  /// "min": a lower metric is better; "max": a higher one.
  std::string mode = "min";
  /// new_lr = lr * factor (< 1).
  double factor = 0.1;
  /// Steps without improvement tolerated before the rate drops.
  std::int64_t patience = 10;
  /// The least change that counts as an improvement.
  double threshold = 1e-4;
  /// "rel": relative to the best value; "abs": absolute.
  std::string threshold_mode = "rel";
  /// Steps to wait after a drop before counting again.
  std::int64_t cooldown = 0;
  /// The lowest rate.
  double min_lr = 0.0;
  /// A drop smaller than eps is not applied.
  double eps = 1e-8;
};

/// PyTorch's ReduceLROnPlateau: lowers the rates by `factor` when the metric given to step(metric) has not
/// improved for `patience` steps. With the Trainer it steps with the metric named by LRSchedulerConfig::monitor.
/// step() without a metric throws std::logic_error. Its state (best, bad steps, cooldown) is saved in
/// checkpoints. std::invalid_argument with PyTorch's messages for invalid options.
class ReduceLROnPlateau : public Scheduler {
 public:
  /// Leaves the rates as they are.
  explicit ReduceLROnPlateau(torch::optim::Optimizer& optimizer, ReduceLROnPlateauOptions options = {});
  /// One step with the monitored value.
  void step(double metric);
  /// The rates now (they depend on the metrics seen, not on the step alone).
  std::vector<double> lrs_at(std::int64_t /*epoch*/) const override { return last_lrs(); }
  /// The best value so far.
  double best() const noexcept { return best_; }
  /// Steps since the last improvement (PyTorch's num_bad_epochs).
  std::int64_t num_bad_epochs() const noexcept { return bad_steps_; }
  bool has_state() const override { return true; }
  void save(torch::serialize::OutputArchive& archive) const override;
  void load(torch::serialize::InputArchive& archive) override;

 protected:
  /// LibTorch's step() without a metric: refused.
  std::vector<double> get_lrs() override;

 private:
  double worst() const;
  bool better(double a) const;

  ReduceLROnPlateauOptions o_;
  double best_ = 0.0;
  std::int64_t bad_steps_ = 0;
  std::int64_t cooldown_counter_ = 0;
  std::int64_t steps_ = 0;
};

}  // namespace volt::optim

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/optim/impl/plateau.ipp>
#endif

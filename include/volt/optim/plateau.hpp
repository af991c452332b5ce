/// \file
/// PyTorch's ReduceLROnPlateau as a volt::optim scheduler: the rates drop when a monitored metric stops
/// improving. The same on every LibTorch version (LibTorch 2.x's torch::optim::ReduceLROnPlateauScheduler is not
/// an LRScheduler and has no state to checkpoint; 1.13 has none).
#pragma once

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
  explicit ReduceLROnPlateau(torch::optim::Optimizer& optimizer, ReduceLROnPlateauOptions options = {})
      : Scheduler(optimizer), o_(std::move(options)) {
    if (o_.factor >= 1.0) throw std::invalid_argument("Factor should be < 1.0.");
    if (o_.mode != "min" && o_.mode != "max") throw std::invalid_argument("mode " + o_.mode + " is unknown!");
    if (o_.threshold_mode != "rel" && o_.threshold_mode != "abs") {
      throw std::invalid_argument("threshold mode " + o_.threshold_mode + " is unknown!");
    }
    best_ = worst();
  }
  /// One step with the monitored value.
  void step(double metric) {
    ++steps_;
    if (better(metric)) {
      best_ = metric;
      bad_steps_ = 0;
    } else {
      ++bad_steps_;
    }
    if (cooldown_counter_ > 0) {
      --cooldown_counter_;
      bad_steps_ = 0;
    }
    if (bad_steps_ > o_.patience) {
      auto& all = groups();
      for (auto& group : all) {
        const double old_lr = group.options().get_lr();
        const double new_lr = std::max(old_lr * o_.factor, o_.min_lr);
        if (old_lr - new_lr > o_.eps) group.options().set_lr(new_lr);
      }
      cooldown_counter_ = o_.cooldown;
      bad_steps_ = 0;
    }
  }
  /// The rates now (they depend on the metrics seen, not on the step alone).
  std::vector<double> lrs_at(std::int64_t /*epoch*/) const override { return last_lrs(); }
  /// The best value so far.
  double best() const noexcept { return best_; }
  /// Steps since the last improvement (PyTorch's num_bad_epochs).
  std::int64_t num_bad_epochs() const noexcept { return bad_steps_; }
  bool has_state() const override { return true; }
  void save(torch::serialize::OutputArchive& archive) const override {
    archive.write("best", c10::IValue(best_));
    archive.write("num_bad_epochs", c10::IValue(bad_steps_));
    archive.write("cooldown_counter", c10::IValue(cooldown_counter_));
    archive.write("last_epoch", c10::IValue(steps_));
    archive.write("lrs", c10::IValue(c10::List<double>(last_lrs())));
  }
  void load(torch::serialize::InputArchive& archive) override {
    c10::IValue value;
    archive.read("best", value);
    best_ = value.toDouble();
    archive.read("num_bad_epochs", value);
    bad_steps_ = value.toInt();
    archive.read("cooldown_counter", value);
    cooldown_counter_ = value.toInt();
    archive.read("last_epoch", value);
    steps_ = value.toInt();
    archive.read("lrs", value);
    std::vector<double> lrs;
    for (const auto& lr : value.toDoubleList()) lrs.push_back(lr);
    apply(lrs);
  }

 protected:
  /// LibTorch's step() without a metric: refused.
  std::vector<double> get_lrs() override {
    throw std::logic_error("volt::optim::ReduceLROnPlateau steps with a metric: call step(metric) (with the Trainer, "
                           "name the metric in LRSchedulerConfig::monitor)");
  }

 private:
  double worst() const {
    return o_.mode == "min" ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
  }
  bool better(double a) const {
    const bool relative = o_.threshold_mode == "rel";
    if (o_.mode == "min") return relative ? a < best_ * (1.0 - o_.threshold) : a < best_ - o_.threshold;
    return relative ? a > best_ * (o_.threshold + 1.0) : a > best_ + o_.threshold;
  }

  ReduceLROnPlateauOptions o_;
  double best_ = 0.0;
  std::int64_t bad_steps_ = 0;
  std::int64_t cooldown_counter_ = 0;
  std::int64_t steps_ = 0;
};

}  // namespace volt::optim

// volt::StepContext: what a model's training/validation/test step receives to log metrics and read the
// Trainer's progress, without inheriting from anything.
#pragma once

#include <volt/callbacks/callback.hpp>
#include <volt/trainer/metrics.hpp>

#include <torch/torch.h>

#include <cstdint>
#include <string_view>

namespace volt {

class StepContext {
 public:
  explicit StepContext(TrainerState& state) : state_(&state) {}

  /// Records a metric (Lightning's `self.log`). In training_step the default is the step value only; in
  /// validation/test steps the default is the epoch mean. A tensor stays on the device until read.
  void log(std::string_view name, const torch::Tensor& value, const LogOptions& options = {}) {
    state_->metrics_->log(name, value, options, state_->phase_);
  }
  void log(std::string_view name, double value, const LogOptions& options = {}) {
    state_->metrics_->log(name, value, options, state_->phase_);
  }

  std::int64_t global_step() const { return state_->global_step; }
  std::int64_t current_epoch() const { return state_->current_epoch; }
  torch::Device device() const { return state_->root_device; }
  Stage stage() const { return state_->stage; }
  bool is_global_zero() const { return state_->is_global_zero; }
  TrainerState& trainer() const { return *state_; }

 private:
  TrainerState* state_;
};

}  // namespace volt

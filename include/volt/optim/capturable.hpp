/// \file
/// volt::optim::CapturableStep: an optimizer step whose every input lives on the device, so that a CUDA graph
/// can capture it once and replay it at later steps; and gradient clipping without a host-device sync.
///
/// LibTorch's Adam keeps each parameter's step count as an int64 on the host and computes the bias
/// corrections there, and every optimizer takes its learning rate as a double: a captured step would replay
/// the numbers of the step it captured. CapturableStep keeps the step counts (float32) and the learning rates
/// on the device, counts on the device, and calls LibTorch's fused kernels with a tensor learning rate
/// (`at::_fused_adam_`, `at::_fused_adamw_`, `at::_fused_sgd_`), which read both there. The moments and
/// momentum buffers stay LibTorch's own state tensors, updated in place, so a checkpoint written after
/// write_back() is LibTorch's format, and optimizer.step() may take over at any point after it.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/compat.hpp>
#include <volt/optim/detail/gather.hpp>

#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

namespace volt::optim {

/// Whether this LibTorch has the fused kernels with a tensor learning rate that CapturableStep calls (2.4+).
inline constexpr bool has_capturable_step = compat::has_tensor_lr_fused_optimizers;

/// Scales `gradients` together so that their total 2-norm is at most `max_norm`, as
/// torch::nn::utils::clip_grad_norm_ does (coefficient max_norm / (norm + 1e-6), capped at 1), but computed
/// on the device: nothing is read back, so the call costs no sync and can be captured in a CUDA graph.
/// Returns the total norm (a 0-dim float32 tensor on the gradients' device). Undefined entries are skipped.
VOLT_INLINE at::Tensor clip_grad_norm_(const std::vector<at::Tensor>& gradients, double max_norm);

/// Clamps every element of `gradients` to [-clip_value, clip_value], as torch::nn::utils::clip_grad_value_
/// (one multi-tensor op per bound from LibTorch 2.4). Undefined entries are skipped.
VOLT_INLINE void clip_grad_value_(const std::vector<at::Tensor>& gradients, double clip_value);

/// One optimizer's step on device-only state (see the file comment). Made after the optimizer has stepped
/// at least once (its state exists), it binds the parameters that have a gradient at construction; step()
/// then updates them from whatever their .grad holds at the call, launching device work only.
///
/// Takes exactly torch::optim::Adam, AdamW and SGD (see obstacle()). Between a step() and any use of the
/// optimizer's own state on the host (saving it, optimizer.step()), call write_back(); after the host has
/// stepped the optimizer, call reload() before the next step().
class CapturableStep {
 public:
  /// Why CapturableStep cannot step `optimizer` on `device_type`, or std::nullopt when it can: the type
  /// (exactly Adam, AdamW or SGD), the LibTorch version (2.4+) and the kernels the device has.
  static std::optional<std::string> obstacle(torch::optim::Optimizer& optimizer, c10::DeviceType device_type);

  /// Binds `optimizer` (which must outlive this object; obstacle() must have said nothing): the parameters
  /// that have a gradient now. Reads the learning rates and step counts into device tensors. Throws
  /// std::invalid_argument when such a parameter has no state yet (step the optimizer once first) or state
  /// of another type.
  explicit CapturableStep(torch::optim::Optimizer& optimizer);

  /// Every bound parameter (in param-group order), the tensors whose .grad step() reads.
  const std::vector<at::Tensor>& parameters() const noexcept { return parameters_; }

  /// Updates the bound parameters from their current .grad: counts the step on the device and calls the
  /// fused kernel of each param group. With `found_inf` (a float32 scalar on the device, as the grad scaler's
  /// unscale sets it): where it is nonzero, the kernels change nothing and the count is taken back, as
  /// PyTorch's fused optimizers do under a GradScaler. Launches device work only; capturable.
  /// Throws c10::Error when a bound parameter has no gradient.
  void step(const std::optional<at::Tensor>& found_inf = std::nullopt);

  /// Copies learning rates that changed on the host (a scheduler, a callback) into the device tensors the
  /// kernels read; launches nothing when none changed. Call it before each replay of a captured step.
  void refresh_learning_rates();

  /// Writes the device step counts into LibTorch's Adam/AdamW state (one device-to-host copy, a sync), so
  /// the optimizer's state is LibTorch's own again: before saving it or stepping it on the host.
  void write_back();

  /// Reads LibTorch's state into the device: learning rates and Adam's step counts. After the host stepped
  /// the optimizer (optimizer.step(), volt::optim::step) or loaded a state.
  void reload();

 private:
  enum class Kind { adam, adamw, sgd };

  struct Group {
    std::size_t index = 0;  // into optimizer.param_groups() and learning_rates_
    std::vector<at::Tensor> params;
    std::vector<at::Tensor> exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps;  // Adam, AdamW
    std::vector<at::Tensor> momentum_buffers;                               // SGD with momentum
    double beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0, momentum = 0, dampening = 0;
    bool amsgrad = false, nesterov = false;
  };

  double host_learning_rate(std::size_t group) const;

  template <class Options, class State>
  void bind() {
    auto& optimizer = *optimizer_;
    std::optional<torch::Device> device;
    std::size_t group_index = 0;
    std::vector<State*> adam_states;
    for (auto& param_group : optimizer.param_groups()) {
      auto* options = dynamic_cast<Options*>(&param_group.options());
      if (options == nullptr) throw std::invalid_argument("volt: a param group's options are not the optimizer's own");
      Group group;
      group.index = group_index++;
      for (auto& parameter : param_group.params()) {
        if (!parameter.grad().defined()) continue;  // not part of the step, as in LibTorch's loop
        bool foreign = false;
        State* state = detail::find_state<State>(optimizer, parameter, foreign);
        if (foreign) throw std::invalid_argument("volt: a parameter's optimizer state is of another type");
        if constexpr (std::is_same_v<State, torch::optim::SGDParamState>) {
          if (options->momentum() != 0) {
            if (state == nullptr || !state->momentum_buffer().defined()) {
              throw std::invalid_argument("volt: SGD has no momentum buffer for a parameter yet; step once first");
            }
            group.momentum_buffers.push_back(state->momentum_buffer());
          }
        } else {
          if (state == nullptr) throw std::invalid_argument("volt: Adam has no state for a parameter yet; step once first");
          group.exp_avgs.push_back(state->exp_avg());
          group.exp_avg_sqs.push_back(state->exp_avg_sq());
          if (options->amsgrad()) group.max_exp_avg_sqs.push_back(state->max_exp_avg_sq());
          adam_states.push_back(state);
        }
        if (!device) device = parameter.device();
        group.params.push_back(parameter);
        parameters_.push_back(parameter);
      }
      if constexpr (std::is_same_v<State, torch::optim::SGDParamState>) {
        group.weight_decay = options->weight_decay();
        group.momentum = options->momentum();
        group.dampening = options->dampening();
        group.nesterov = options->nesterov();
      } else {
        group.beta1 = std::get<0>(options->betas());
        group.beta2 = std::get<1>(options->betas());
        group.eps = options->eps();
        group.weight_decay = options->weight_decay();
        group.amsgrad = options->amsgrad();
      }
      groups_.push_back(std::move(group));
    }
    const auto on = at::TensorOptions().dtype(at::kFloat).device(device.value_or(torch::kCPU));
    for (std::size_t i = 0; i < groups_.size(); ++i) {
      learning_rates_.push_back(at::zeros({}, on));
      cached_learning_rates_.push_back(0.0);
    }
    if constexpr (!std::is_same_v<State, torch::optim::SGDParamState>) {
      if (!adam_states.empty()) {
        // One tensor for all counts: counting a step is one kernel, reading them back one copy.
        steps_ = at::zeros({static_cast<std::int64_t>(adam_states.size())}, on);
        const auto views = steps_.unbind(0);
        std::size_t next = 0;
        for (auto& group : groups_) {
          for (std::size_t i = 0; i < group.params.size(); ++i) group.steps.push_back(views[next++]);
        }
        for (State* state : adam_states) {
          step_getters_.push_back([state] { return state->step(); });
          step_setters_.push_back([state](std::int64_t count) { state->step(count); });
        }
      }
    }
    std::erase_if(groups_, [](const Group& group) { return group.params.empty(); });
  }

  torch::optim::Optimizer* optimizer_;
  Kind kind_ = Kind::adam;
  std::vector<Group> groups_;
  std::vector<at::Tensor> parameters_;       // every bound parameter, in param-group order
  std::vector<at::Tensor> learning_rates_;  // one per param group of the optimizer
  std::vector<double> cached_learning_rates_;
  at::Tensor steps_;  // Adam/AdamW: every bound parameter's step count
  std::vector<std::function<std::int64_t()>> step_getters_;
  std::vector<std::function<void(std::int64_t)>> step_setters_;
};

}  // namespace volt::optim

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/optim/impl/capturable.ipp>
#endif

/// \file
/// volt::optim::try_adam_step: multi-tensor and fused steps of LibTorch's torch::optim::Adam and AdamW.
///
/// They compute LibTorch's own update (LibTorch 1.13 through 2.11 share it), per param group:
///
/// ```
/// step += 1                                  (AdamParamState::step, an int64 on the host)
/// Adam:  g = grad + weight_decay * p         AdamW: p *= 1 - lr * weight_decay
/// m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g * g;  amsgrad: v_max = max(v_max, v)
/// p -= lr / (1 - beta1^step) * m / (sqrt(v or v_max) / sqrt(1 - beta2^step) + eps)
/// ```
///
/// with the bias corrections computed in double on the host from each parameter's own step count, and
/// read and write LibTorch's own state (AdamParamState / AdamWParamState: step, exp_avg, exp_avg_sq,
/// max_exp_avg_sq) and options, so a volt-stepped optimizer saves, loads and continues exactly like one
/// LibTorch stepped, and the other way round.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/compat.hpp>
#include <volt/optim/detail/gather.hpp>
#include <volt/optim/implementation.hpp>

#include <torch/torch.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <tuple>
#include <type_traits>
#include <vector>

namespace volt::optim {

namespace detail {

template <class Optimizer>
struct AdamTraits;

template <>
struct AdamTraits<torch::optim::Adam> {
  using Options = torch::optim::AdamOptions;
  using State = torch::optim::AdamParamState;
  static constexpr bool decoupled_weight_decay = false;
};

template <>
struct AdamTraits<torch::optim::AdamW> {
  using Options = torch::optim::AdamWOptions;
  using State = torch::optim::AdamWParamState;
  static constexpr bool decoupled_weight_decay = true;
};

/// Whether `automatic` picks the fused kernel (where LibTorch has it for the device): on CUDA one kernel
/// replaces about ten launches per param group; on CPU one pass over memory replaces about ten
/// (benchmarks/results/optimizer-step.md).
VOLT_INLINE bool automatic_prefers_fused_adam(c10::DeviceType device_type);

/// One param group's share of a step: the parameters with a gradient and their state.
template <class Options, class State>
struct AdamGroupWork {
  Options* options = nullptr;
  std::vector<at::Tensor> params;
  std::vector<at::Tensor> grads;
  std::vector<State*> states;  // nullptr: created by the step (first step of that parameter)
};

/// The foreach form of LibTorch's loop for one param group whose states were counted up already.
VOLT_INLINE void adam_multi_tensor_group(bool decoupled_weight_decay, const std::vector<at::Tensor>& params,
                                         const std::vector<at::Tensor>& grads, std::vector<at::Tensor>& exp_avgs,
                                         std::vector<at::Tensor>& exp_avg_sqs, std::vector<at::Tensor>& max_exp_avg_sqs,
                                         const std::vector<double>& bias_correction2_roots,
                                         const std::vector<double>& negative_step_sizes, double lr, double beta1,
                                         double beta2, double eps, double weight_decay, bool amsgrad);

/// Whether LibTorch's fused kernel can take this group: one dtype it supports, contiguous tensors.
VOLT_INLINE bool fused_adam_takes(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& grads,
                                  const std::vector<at::Tensor>& exp_avgs, const std::vector<at::Tensor>& exp_avg_sqs,
                                  const std::vector<at::Tensor>& max_exp_avg_sqs);

/// LibTorch's fused kernel for one group. The kernel reads each parameter's (already counted) step from
/// a float32 tensor on the device: one host-to-device copy of all step numbers, then views of it.
VOLT_INLINE void adam_fused_group(bool decoupled_weight_decay, const std::vector<at::Tensor>& params,
                                  const std::vector<at::Tensor>& grads, std::vector<at::Tensor>& exp_avgs,
                                  std::vector<at::Tensor>& exp_avg_sqs, std::vector<at::Tensor>& max_exp_avg_sqs,
                                  const std::vector<std::int64_t>& steps, double lr, double beta1, double beta2, double eps,
                                  double weight_decay, bool amsgrad);

}  // namespace detail

/// One step of `optimizer` (a torch::optim::Adam or AdamW, exactly that type) with multi-tensor ops, or with
/// LibTorch's fused kernel where `requested` allows it (fused or automatic) and the kernel exists for the
/// device (CUDA and CPU in recent LibTorch versions; see compat::fused_adam_available). Equal to `optimizer.step()` within float rounding (on CPU the multi-tensor ops perform
/// the same operations as LibTorch's loop), on the same state.
///
/// Returns what ran (fused only when every param group was fused), or std::nullopt, changing nothing, when
/// volt leaves this optimizer to optimizer.step(): options or state of another type, a parameter listed
/// twice, sparse or mismatched gradients, tensors on several devices, amsgrad on state created without it.
/// `requested == per_parameter` also returns std::nullopt. Throws what the ATen ops throw.
template <class AdamLike>
  requires std::is_same_v<AdamLike, torch::optim::Adam> || std::is_same_v<AdamLike, torch::optim::AdamW>
std::optional<Implementation> try_adam_step(AdamLike& optimizer, Implementation requested) {
  using Traits = detail::AdamTraits<AdamLike>;
  using Options = typename Traits::Options;
  using State = typename Traits::State;
  constexpr bool decoupled = Traits::decoupled_weight_decay;
  if (requested == Implementation::per_parameter) return std::nullopt;

  // Check everything before changing anything.
  std::vector<detail::AdamGroupWork<Options, State>> work;
  work.reserve(optimizer.param_groups().size());
  std::vector<const c10::TensorImpl*> impls;
  detail::CommonDevice device;
  for (auto& group : optimizer.param_groups()) {
    auto* options = dynamic_cast<Options*>(&group.options());
    if (options == nullptr) return std::nullopt;
    auto& group_work = work.emplace_back();
    group_work.options = options;
    for (auto& parameter : group.params()) {
      const auto& grad = parameter.grad();
      if (!grad.defined()) continue;
      if (!detail::plain_dense_pair(parameter, grad) || !device.admit(parameter) || !device.admit(grad)) {
        return std::nullopt;
      }
      bool foreign = false;
      State* state = detail::find_state<State>(optimizer, parameter, foreign);
      if (foreign) return std::nullopt;
      if (state != nullptr) {
        if (!detail::usable_state_tensor(state->exp_avg(), parameter, device) ||
            !detail::usable_state_tensor(state->exp_avg_sq(), parameter, device)) {
          return std::nullopt;
        }
        if (options->amsgrad() && !detail::usable_state_tensor(state->max_exp_avg_sq(), parameter, device)) {
          return std::nullopt;
        }
      }
      group_work.params.push_back(parameter);
      group_work.grads.push_back(grad);
      group_work.states.push_back(state);
      impls.push_back(parameter.unsafeGetTensorImpl());
    }
  }
  if (detail::has_duplicates(impls)) return std::nullopt;
  if (impls.empty()) return requested == Implementation::fused ? Implementation::fused : Implementation::multi_tensor;

  const auto device_type = device.device()->type();
  const bool want_fused = (requested == Implementation::fused ||
                           (requested == Implementation::automatic && detail::automatic_prefers_fused_adam(device_type))) &&
                          compat::fused_adam_available(device_type, decoupled);
  bool all_fused = want_fused;

  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> exp_avgs, exp_avg_sqs, max_exp_avg_sqs;
  std::vector<std::int64_t> steps;
  std::vector<double> bias_correction2_roots, negative_step_sizes;
  for (auto& group_work : work) {
    if (group_work.params.empty()) continue;
    const auto& options = *group_work.options;
    const double lr = options.lr();
    const double beta1 = std::get<0>(options.betas());
    const double beta2 = std::get<1>(options.betas());
    const bool amsgrad = options.amsgrad();
    exp_avgs.clear(), exp_avg_sqs.clear(), max_exp_avg_sqs.clear(), steps.clear();
    bias_correction2_roots.clear(), negative_step_sizes.clear();
    for (std::size_t i = 0; i < group_work.params.size(); ++i) {
      State* state = group_work.states[i];
      const auto& parameter = group_work.params[i];
      if (state == nullptr) {
        auto created = std::make_unique<State>();
        created->step(0);
        created->exp_avg(torch::zeros_like(parameter, at::MemoryFormat::Preserve));
        created->exp_avg_sq(torch::zeros_like(parameter, at::MemoryFormat::Preserve));
        if (amsgrad) created->max_exp_avg_sq(torch::zeros_like(parameter, at::MemoryFormat::Preserve));
        state = detail::insert_state(optimizer, parameter, std::move(created));
      }
      state->step(state->step() + 1);
      const auto step = state->step();
      steps.push_back(step);
      // LibTorch: 1 - std::pow(beta, step) in double, with step an int64.
      const double bias_correction1 = 1 - std::pow(beta1, step);
      const double bias_correction2 = 1 - std::pow(beta2, step);
      bias_correction2_roots.push_back(std::sqrt(bias_correction2));
      negative_step_sizes.push_back(-(lr / bias_correction1));
      exp_avgs.push_back(state->exp_avg());
      exp_avg_sqs.push_back(state->exp_avg_sq());
      if (amsgrad) max_exp_avg_sqs.push_back(state->max_exp_avg_sq());
    }
    if (want_fused &&
        detail::fused_adam_takes(group_work.params, group_work.grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs)) {
      detail::adam_fused_group(decoupled, group_work.params, group_work.grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs,
                               steps, lr, beta1, beta2, options.eps(), options.weight_decay(), amsgrad);
    } else {
      all_fused = false;
      detail::adam_multi_tensor_group(decoupled, group_work.params, group_work.grads, exp_avgs, exp_avg_sqs,
                                      max_exp_avg_sqs, bias_correction2_roots, negative_step_sizes, lr, beta1, beta2,
                                      options.eps(), options.weight_decay(), amsgrad);
    }
  }
  return all_fused ? Implementation::fused : Implementation::multi_tensor;
}

}  // namespace volt::optim

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/optim/impl/adam.ipp>
#endif

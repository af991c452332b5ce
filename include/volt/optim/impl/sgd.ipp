/// \file
/// Definitions of the functions declared in volt/optim/sgd.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::optim {

VOLT_INLINE std::optional<Implementation> try_sgd_step(torch::optim::SGD& optimizer, Implementation requested) {
  if (requested == Implementation::per_parameter) return std::nullopt;

  struct GroupWork {
    torch::optim::SGDOptions* options = nullptr;
    std::vector<at::Tensor> params;
    std::vector<at::Tensor> grads;
    std::vector<torch::optim::SGDParamState*> states;  // nullptr: no buffer yet
  };
  std::vector<GroupWork> work;
  work.reserve(optimizer.param_groups().size());
  std::vector<const c10::TensorImpl*> impls;
  detail::CommonDevice device;
  for (auto& group : optimizer.param_groups()) {
    auto* options = dynamic_cast<torch::optim::SGDOptions*>(&group.options());
    if (options == nullptr) return std::nullopt;
    auto& group_work = work.emplace_back();
    group_work.options = options;
    for (auto& parameter : group.params()) {
      const auto& grad = parameter.grad();
      if (!grad.defined()) continue;
      if (!detail::plain_dense_pair(parameter, grad) || !device.admit(parameter) || !device.admit(grad)) {
        return std::nullopt;
      }
      torch::optim::SGDParamState* state = nullptr;
      if (options->momentum() != 0) {
        bool foreign = false;
        state = detail::find_state<torch::optim::SGDParamState>(optimizer, parameter, foreign);
        if (foreign) return std::nullopt;
        if (state != nullptr && !detail::usable_state_tensor(state->momentum_buffer(), parameter, device)) {
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
  if (requested == Implementation::automatic && device.device() && device.device()->is_cpu()) return std::nullopt;

  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> buffers, stepped_buffers, stepped_updates;
  for (auto& group_work : work) {
    if (group_work.params.empty()) continue;
    const auto& options = *group_work.options;
    const double momentum = options.momentum();
    const double weight_decay = options.weight_decay();

    std::vector<at::Tensor> updates = weight_decay != 0
                                          ? at::_foreach_add(group_work.grads, group_work.params, at::Scalar(weight_decay))
                                          : group_work.grads;
    if (momentum != 0) {
      buffers.clear(), stepped_buffers.clear(), stepped_updates.clear();
      for (std::size_t i = 0; i < group_work.params.size(); ++i) {
        if (group_work.states[i] == nullptr) {
          // LibTorch's first step: the buffer is a copy of the update, without dampening.
          auto created = std::make_unique<torch::optim::SGDParamState>();
          created->momentum_buffer(updates[i].detach().clone());
          buffers.push_back(detail::insert_state(optimizer, group_work.params[i], std::move(created))->momentum_buffer());
        } else {
          buffers.push_back(group_work.states[i]->momentum_buffer());
          stepped_buffers.push_back(buffers.back());
          stepped_updates.push_back(updates[i]);
        }
      }
      if (!stepped_buffers.empty()) {
        at::_foreach_mul_(stepped_buffers, at::Scalar(momentum));
        at::_foreach_add_(stepped_buffers, stepped_updates, at::Scalar(1 - options.dampening()));
      }
      if (options.nesterov()) {
        updates = at::_foreach_add(updates, buffers, at::Scalar(momentum));
      } else {
        updates = buffers;
      }
    }
    at::_foreach_add_(group_work.params, updates, at::Scalar(-1 * options.lr()));
  }
  return Implementation::multi_tensor;
}

}  // namespace volt::optim

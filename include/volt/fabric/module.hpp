/// \file
/// What volt::Fabric accepts as a model and an optimizer, and moving an optimizer's state to the device;
/// implementation of volt::Fabric, no public API.
#pragma once

#include <volt/core/linkage.hpp>
#include <torch/torch.h>

#include <concepts>
#include <memory>
#include <sstream>
#include <stdexcept>

namespace volt::detail {

/// A std::shared_ptr (or alike) to a torch::nn::Module.
template <class T>
concept fabric_module_shared_ptr = requires(const T& pointer) {
  typename T::element_type;
  requires std::derived_from<typename T::element_type, torch::nn::Module>;
  { pointer.get() };
};
/// A ModuleHolder (a TORCH_MODULE type such as torch::nn::Linear).
template <class T>
concept fabric_module_holder = requires(const T& holder) {
  { holder.ptr() } -> std::convertible_to<std::shared_ptr<torch::nn::Module>>;
};
/// A std::shared_ptr (or alike) to a torch::optim::Optimizer.
template <class T>
concept fabric_optimizer_shared_ptr = requires {
  typename T::element_type;
  requires std::derived_from<typename T::element_type, torch::optim::Optimizer>;
};

/// The module behind `model` (a module, a pointer to one, or a ModuleHolder); std::invalid_argument when the
/// pointer or holder is empty.
template <class Model>
torch::nn::Module& fabric_module(const Model& model) {
  if constexpr (std::derived_from<Model, torch::nn::Module>) {
    return const_cast<Model&>(model);
  } else if constexpr (fabric_module_holder<Model>) {
    if (model.is_empty()) throw std::invalid_argument("volt::Fabric: the model holder is empty");
    return *model.ptr();
  } else {
    static_assert(fabric_module_shared_ptr<Model>,
                  "volt::Fabric: the model must be a torch::nn::Module, a std::shared_ptr to one, or a ModuleHolder "
                  "(a TORCH_MODULE type such as torch::nn::Linear)");
    if (!model) throw std::invalid_argument("volt::Fabric: the model pointer is empty");
    return *model;
  }
}

/// Moves an optimizer's state tensors (Adam's moments, SGD's momentum, ...) to `device` by a round trip
/// through LibTorch's serialization, which maps every tensor to the device while loading. No-op when the
/// optimizer has no state yet.
VOLT_INLINE void optimizer_state_to_device(torch::optim::Optimizer& optimizer, torch::Device device);

}  // namespace volt::detail

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/fabric/impl/module.ipp>
#endif

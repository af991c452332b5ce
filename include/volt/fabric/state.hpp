/// \file
/// volt::FabricState: the named objects fabric.save(path, state) writes and fabric.load(path, state) restores.
///
/// Named references to modules, optimizers, tensors and numbers of the user's program; load() restores them
/// in place.
///
/// ```
/// std::int64_t step = 0;
/// volt::FabricState state{{"model", model}, {"optimizer", optimizer}, {"step", step}};
/// fabric.save("run/last.ckpt", state);
/// fabric.load("run/last.ckpt", state);   // model, optimizer and step restored
/// ```
#pragma once

#include <volt/core/linkage.hpp>
#include <torch/torch.h>

#include <concepts>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <variant>

namespace volt {

/// One entry of a FabricState: a reference to an object owned by the caller (which must outlive the
/// FabricState). Modules and optimizers are held by shared_ptr (as setup() returns them); tensors and numbers
/// by pointer, so load() can assign them.
class FabricStateEntry {
 public:
  /// A module held by std::shared_ptr (as setup() returns it): its parameters and buffers.
  template <class M>
    requires std::derived_from<M, torch::nn::Module>
  FabricStateEntry(std::shared_ptr<M> module) : target_(std::shared_ptr<torch::nn::Module>(std::move(module))) {}  // NOLINT
  /// A module held by a ModuleHolder (a TORCH_MODULE type such as torch::nn::Linear).
  template <class Holder>
    requires requires(const Holder& holder) {
      { holder.ptr() } -> std::convertible_to<std::shared_ptr<torch::nn::Module>>;
    }
  FabricStateEntry(const Holder& holder) : target_(std::shared_ptr<torch::nn::Module>(holder.ptr())) {}  // NOLINT
  /// An optimizer held by std::shared_ptr: its state (moments, step counts) and param-group options.
  template <class O>
    requires std::derived_from<O, torch::optim::Optimizer>
  FabricStateEntry(std::shared_ptr<O> optimizer)  // NOLINT
      : target_(std::shared_ptr<torch::optim::Optimizer>(std::move(optimizer))) {}
  /// A tensor variable; load() assigns it the saved tensor, on Fabric's device.
  FabricStateEntry(torch::Tensor& tensor) : target_(&tensor) {}  // NOLINT
  /// An integer variable (saved as an int64 tensor); load() assigns it.
  FabricStateEntry(std::int64_t& value) : target_(&value) {}     // NOLINT
  /// An integer variable (saved as an int64 tensor); load() assigns it.
  FabricStateEntry(int& value) : target_(&value) {}              // NOLINT
  /// A floating-point variable (saved as a float64 tensor); load() assigns it.
  FabricStateEntry(double& value) : target_(&value) {}           // NOLINT
  /// A bool variable (saved as an int64 tensor); load() assigns it.
  FabricStateEntry(bool& value) : target_(&value) {}             // NOLINT

  /// Writes the referenced object into `archive` (a module's parameters and buffers, an optimizer's state,
  /// a tensor or a number as a 0-dim tensor).
  void save(torch::serialize::OutputArchive& archive) const;

  /// Restores the referenced object from `archive` (in place for modules and optimizers; a tensor moves to
  /// `device`). Throws what LibTorch throws for a missing or mis-shaped entry. Fabric::load calls it.
  void load(torch::serialize::InputArchive& archive, torch::Device device) const;

 private:
  std::variant<std::shared_ptr<torch::nn::Module>, std::shared_ptr<torch::optim::Optimizer>, torch::Tensor*,
               std::int64_t*, int*, double*, bool*>
      target_;
};

/// Named references saved and loaded together by Fabric::save and Fabric::load (Lightning's `state` dict).
using FabricState = std::map<std::string, FabricStateEntry>;

}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/fabric/impl/state.ipp>
#endif

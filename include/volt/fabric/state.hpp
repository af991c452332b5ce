// volt::FabricState: what fabric.save(path, state) writes and fabric.load(path, state) restores in place:
// named references to modules, optimizers, tensors and numbers of the user's program.
//
//   std::int64_t step = 0;
//   volt::FabricState state{{"model", model}, {"optimizer", optimizer}, {"step", step}};
//   fabric.save("run/last.ckpt", state);
//   fabric.load("run/last.ckpt", state);   // model, optimizer and step restored
#pragma once

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
  template <class M>
    requires std::derived_from<M, torch::nn::Module>
  FabricStateEntry(std::shared_ptr<M> module) : target_(std::shared_ptr<torch::nn::Module>(std::move(module))) {}  // NOLINT
  template <class Holder>
    requires requires(const Holder& holder) {
      { holder.ptr() } -> std::convertible_to<std::shared_ptr<torch::nn::Module>>;
    }
  FabricStateEntry(const Holder& holder) : target_(std::shared_ptr<torch::nn::Module>(holder.ptr())) {}  // NOLINT
  template <class O>
    requires std::derived_from<O, torch::optim::Optimizer>
  FabricStateEntry(std::shared_ptr<O> optimizer)  // NOLINT
      : target_(std::shared_ptr<torch::optim::Optimizer>(std::move(optimizer))) {}
  FabricStateEntry(torch::Tensor& tensor) : target_(&tensor) {}  // NOLINT
  FabricStateEntry(std::int64_t& value) : target_(&value) {}     // NOLINT
  FabricStateEntry(int& value) : target_(&value) {}              // NOLINT
  FabricStateEntry(double& value) : target_(&value) {}           // NOLINT
  FabricStateEntry(bool& value) : target_(&value) {}             // NOLINT

  /// Writes the referenced object into `archive` (a module's parameters and buffers, an optimizer's state,
  /// a tensor or a number as a 0-dim tensor).
  void save(torch::serialize::OutputArchive& archive) const {
    std::visit(
        [&](const auto& target) {
          using T = std::remove_cvref_t<decltype(target)>;
          if constexpr (std::is_same_v<T, std::shared_ptr<torch::nn::Module>>) {
            target->save(archive);
          } else if constexpr (std::is_same_v<T, std::shared_ptr<torch::optim::Optimizer>>) {
            target->save(archive);
          } else if constexpr (std::is_same_v<T, torch::Tensor*>) {
            archive.write("tensor", *target);
          } else if constexpr (std::is_same_v<T, double*>) {
            archive.write("value", torch::tensor(*target, torch::kDouble));
          } else {
            archive.write("value", torch::tensor(static_cast<std::int64_t>(*target), torch::kLong));
          }
        },
        target_);
  }

  /// Restores the referenced object from `archive` (in place for modules and optimizers). Throws what
  /// LibTorch throws for a missing or mis-shaped entry.
  void load(torch::serialize::InputArchive& archive, torch::Device device) const {
    std::visit(
        [&](const auto& target) {
          using T = std::remove_cvref_t<decltype(target)>;
          if constexpr (std::is_same_v<T, std::shared_ptr<torch::nn::Module>>) {
            target->load(archive);
          } else if constexpr (std::is_same_v<T, std::shared_ptr<torch::optim::Optimizer>>) {
            target->load(archive);
          } else if constexpr (std::is_same_v<T, torch::Tensor*>) {
            torch::Tensor value;
            archive.read("tensor", value);
            *target = value.to(device);
          } else {
            torch::Tensor value;
            archive.read("value", value);
            if constexpr (std::is_same_v<T, double*>) {
              *target = value.item<double>();
            } else {
              *target = static_cast<std::remove_pointer_t<T>>(value.item<std::int64_t>());
            }
          }
        },
        target_);
  }

 private:
  std::variant<std::shared_ptr<torch::nn::Module>, std::shared_ptr<torch::optim::Optimizer>, torch::Tensor*,
               std::int64_t*, int*, double*, bool*>
      target_;
};

/// Named references saved and loaded together by Fabric::save and Fabric::load (Lightning's `state` dict).
using FabricState = std::map<std::string, FabricStateEntry>;

}  // namespace volt

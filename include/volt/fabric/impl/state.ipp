/// \file
/// Definitions of the functions declared in volt/fabric/state.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt {

VOLT_INLINE void FabricStateEntry::save(torch::serialize::OutputArchive& archive) const {
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

VOLT_INLINE void FabricStateEntry::load(torch::serialize::InputArchive& archive, torch::Device device) const {
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

}  // namespace volt

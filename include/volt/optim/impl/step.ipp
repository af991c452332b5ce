/// \file
/// Definitions of the functions declared in volt/optim/step.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::optim {

VOLT_INLINE Implementation step(torch::optim::Optimizer& optimizer, Implementation requested) {
  std::optional<Implementation> ran;
  const auto& type = typeid(optimizer);
  if (type == typeid(torch::optim::Adam)) {
    ran = try_adam_step(static_cast<torch::optim::Adam&>(optimizer), requested);
  } else if (type == typeid(torch::optim::AdamW)) {
    ran = try_adam_step(static_cast<torch::optim::AdamW&>(optimizer), requested);
  } else if (type == typeid(torch::optim::SGD)) {
    ran = try_sgd_step(static_cast<torch::optim::SGD&>(optimizer), requested);
  }
  if (!ran) {
    optimizer.step();
    ran = Implementation::per_parameter;
  }
  detail::count_step(*ran);
  return *ran;
}

VOLT_INLINE Implementation step(torch::optim::Optimizer& optimizer) { return step(optimizer, default_implementation()); }

}  // namespace volt::optim

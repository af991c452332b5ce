/// \file
/// Definitions of the functions declared in volt/trainer/module.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE OptimizerConfig optimizer_entry_config(OptimizerConfig config, std::size_t index) {
  TORCH_CHECK(config.optimizer != nullptr, "volt: configure_optimizers() returned an OptimizerConfig without an optimizer",
              index > 0 ? " (entry " + std::to_string(index) + ")" : std::string());
  return config;
}

}  // namespace volt::detail

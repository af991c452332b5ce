/// \file
/// Definitions of the functions declared in volt/fabric/options.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE void validate(const FabricOptions& options) {
  if (options.num_nodes < 1) {
    throw std::invalid_argument("`num_nodes` must be a positive integer, but got " + std::to_string(options.num_nodes) +
                                ". (volt::Fabric({.num_nodes = " + std::to_string(options.num_nodes) + "}))");
  }
}

}  // namespace volt::detail

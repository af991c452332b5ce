/// \file
/// volt::FabricOptions: the construction options of volt::Fabric and their validation.
///
/// They are Lightning's Fabric(...) arguments that are not policies.
#pragma once

#include <volt/accelerators/device_spec.hpp>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

namespace volt {

/// Options of volt::Fabric, for designated initializers: `volt::Fabric<volt::CPU> fabric({.devices = 1, .seed = 42});`
struct FabricOptions {
  /// Which devices: a count, ids or "auto" (the accelerator's auto_device_count()), as for the Trainer.
  DeviceSpec devices{};
  /// Machines taking part (Lightning's num_nodes); must be >= 1. volt::SingleDevice needs 1.
  int num_nodes = 1;
  /// When set, the constructor seeds LibTorch's generators (Lightning's fabric.seed_everything(seed)).
  std::optional<std::uint64_t> seed{};
};

namespace detail {

/// Lightning Fabric's argument checks. Throws std::invalid_argument (ValueError) with Lightning's message.
inline void validate(const FabricOptions& options) {
  if (options.num_nodes < 1) {
    throw std::invalid_argument("`num_nodes` must be a positive integer, but got " + std::to_string(options.num_nodes) +
                                ". (volt::Fabric({.num_nodes = " + std::to_string(options.num_nodes) + "}))");
  }
}

}  // namespace detail
}  // namespace volt

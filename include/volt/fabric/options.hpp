/// \file
/// volt::FabricOptions: the construction options of volt::Fabric and their validation.
///
/// They are Lightning's Fabric(...) arguments that are not policies.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/accelerators/device_spec.hpp>
#include <volt/core/math_modes.hpp>
#include <volt/transfer/memory_format.hpp>

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
  /// LibTorch's deterministic algorithms (true, false, "warn"), as TrainerOptions::deterministic; set by the
  /// constructor.
  Deterministic deterministic{};
  /// cuDNN's benchmark mode, as TrainerOptions::benchmark; set by the constructor.
  std::optional<bool> benchmark{};
  /// torch.set_float32_matmul_precision ("highest", "high", "medium"), as
  /// TrainerOptions::float32_matmul_precision; set by the constructor.
  Float32MatmulPrecision float32_matmul_precision{};
  /// The layout of set-up models' 4-D tensors and of the batches to_device() and setup_dataloaders() move, as
  /// TrainerOptions::memory_format (automatic: channels-last once a model with a 2-D convolution is set up on
  /// CUDA).
  MemoryFormat memory_format = MemoryFormat::contiguous;
};

namespace detail {

/// Lightning Fabric's argument checks. Throws std::invalid_argument (ValueError) with Lightning's message.
VOLT_INLINE void validate(const FabricOptions& options);

}  // namespace detail
}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/fabric/impl/options.ipp>
#endif

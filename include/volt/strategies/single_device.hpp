/// \file
/// volt::SingleDevice: train on one device in one process (Lightning's SingleDeviceStrategy).
#pragma once

#include <string_view>

namespace volt {

/// Strategy policy: one process, one device. The model, the optimizer state and every batch live on the
/// Trainer's root device. Reductions, barriers and broadcasts are identities.
struct SingleDevice {
  /// Lightning's strategy name, used in messages and by the command line.
  static constexpr std::string_view name = "single_device";
  /// Whether the strategy runs several processes that synchronise gradients (the DDP family).
  static constexpr bool is_distributed = false;
};

}  // namespace volt

/// \file
/// volt::DDP: distributed data parallel over c10d process groups (Lightning's DDPStrategy).
#pragma once

#include <string_view>

namespace volt {

/// Strategy policy: one process per device, gradients averaged across processes.
struct DDP {
  /// Lightning's strategy name, used in messages and by the command line.
  static constexpr std::string_view name = "ddp";
  /// Whether the strategy runs several processes that synchronise gradients (the DDP family).
  static constexpr bool is_distributed = true;
};

}  // namespace volt

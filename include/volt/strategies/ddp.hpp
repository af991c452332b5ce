// volt::DDP: distributed data parallel over c10d process groups (Lightning's DDPStrategy).
#pragma once

#include <string_view>

namespace volt {

/// Strategy policy: one process per device, gradients averaged across processes.
struct DDP {
  static constexpr std::string_view name = "ddp";
  static constexpr bool is_distributed = true;
};

}  // namespace volt

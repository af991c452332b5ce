/// \file
/// Definitions of the functions declared in volt/transfer/batch_to_device.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt {

VOLT_INLINE bool transfer_is_non_blocking(torch::Device device) noexcept {
  return device.type() != c10::DeviceType::CPU && device.type() != c10::DeviceType::MPS;
}

}  // namespace volt

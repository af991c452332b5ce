/// \file
/// Definitions of the functions declared in volt/accelerators/accelerator.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE void check_device_type(torch::Device device, c10::DeviceType expected, std::string_view label,
                                   bool final_period, Frontend frontend) {
  if (device.type() == expected) return;
  std::string message = "Device should be " + std::string(label) + ", got " + device.str() + " instead";
  if (final_period) message += '.';
  if (frontend == Frontend::fabric) throw std::invalid_argument(message);
  throw MisconfigurationError(message);
}

}  // namespace volt::detail

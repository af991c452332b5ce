/// \file
/// Definitions of the functions declared in volt/precision/autocast.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt {

VOLT_INLINE AutocastGuard::AutocastGuard(c10::DeviceType device_type, c10::ScalarType dtype, AutocastOptions options)
    : device_type_(device_type) {
  if (options.enabled && !compat::autocast_dtype_supported(device_type, dtype)) {
    throw std::runtime_error(std::string("volt: this LibTorch (") + compat::torch_version_string + ") cannot autocast to " +
                             c10::toString(dtype) + " on device type " + c10::DeviceTypeName(device_type) +
                             "; use volt::BF16Autocast on CPU, a newer LibTorch for MPS, or volt::FP32");
  }
  previous_cache_enabled_ = compat::autocast_cache_enabled();
  previous_enabled_ = compat::autocast_enabled(device_type);
  // LibTorch 1.13 has no dtype slot for device types it cannot autocast on.
  dtype_known_ = compat::autocast_available(device_type);
  if (dtype_known_) previous_dtype_ = compat::autocast_dtype(device_type);
  if (options.enabled || previous_enabled_) compat::set_autocast_enabled(device_type, options.enabled);
  if (dtype_known_) compat::set_autocast_dtype(device_type, dtype);
  compat::autocast_increment_nesting();
  compat::set_autocast_cache_enabled(options.cache_enabled);
}

VOLT_INLINE AutocastGuard::~AutocastGuard() {
  if (compat::autocast_decrement_nesting() == 0) compat::autocast_clear_cache();
  if (compat::autocast_enabled(device_type_) != previous_enabled_) {
    compat::set_autocast_enabled(device_type_, previous_enabled_);
  }
  if (dtype_known_) compat::set_autocast_dtype(device_type_, previous_dtype_);
  compat::set_autocast_cache_enabled(previous_cache_enabled_);
}

}  // namespace volt

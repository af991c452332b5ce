// A constant device spec of more than one device for MPS must not compile: MPS has one device.
// expect: volt: the MPS accelerator has one device
#include <volt/accelerators/mps.hpp>
#include <volt/accelerators/static_devices.hpp>

namespace accelerators_mps_static_two_devices {

int use() {
#ifndef VOLT_COMPILE_FAIL_CONTROL
  constexpr volt::DeviceSpec spec = volt::static_devices<volt::MPS, "0,1">;
#else
  constexpr volt::DeviceSpec spec = volt::static_devices<volt::MPS, "0,">;
#endif
  return spec.ids().size();
}

}  // namespace accelerators_mps_static_two_devices

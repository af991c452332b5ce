// A constant device spec that selects no device must not compile (Lightning: "value is not a valid input").
// expect: volt: a constant device spec must select at least one device
#include <volt/accelerators/cuda.hpp>
#include <volt/accelerators/static_devices.hpp>

namespace accelerators_static_no_devices {

int use() {
#ifndef VOLT_COMPILE_FAIL_CONTROL
  constexpr volt::DeviceSpec spec = volt::static_devices<volt::CUDA, "0">;
#else
  constexpr volt::DeviceSpec spec = volt::static_devices<volt::CUDA, "0,">;
#endif
  return spec.ids().size();
}

}  // namespace accelerators_static_no_devices

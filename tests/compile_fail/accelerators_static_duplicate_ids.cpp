// A constant device spec with a repeated id must not compile (Lightning: "Device ID's (GPU) must be unique.").
// expect: device_ids_must_be_unique
#include <volt/accelerators/cuda.hpp>
#include <volt/accelerators/static_devices.hpp>

namespace accelerators_static_duplicate_ids {

int use() {
#ifndef VOLT_COMPILE_FAIL_CONTROL
  constexpr volt::DeviceSpec spec = volt::static_devices<volt::CUDA, volt::devices({1, 1})>;
#else
  constexpr volt::DeviceSpec spec = volt::static_devices<volt::CUDA, volt::devices({1, 2})>;
#endif
  return spec.ids().size();
}

}  // namespace accelerators_static_duplicate_ids

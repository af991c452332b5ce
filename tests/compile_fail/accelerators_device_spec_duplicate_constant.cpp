// A constant device spec string with a repeated id is a compile error: every accelerator refuses it (the GPU
// parsers: "Device ID's (GPU) must be unique."; the CPU parser refuses every list).
// expect: device_ids_must_be_unique
#include <volt/accelerators/device_spec.hpp>

namespace accelerators_device_spec_duplicate_constant {

int use() {
#ifndef VOLT_COMPILE_FAIL_CONTROL
  constexpr volt::DeviceSpec spec{"0, 0"};
#else
  constexpr volt::DeviceSpec spec{"0, 1"};
#endif
  return spec.ids().size();
}

}  // namespace accelerators_device_spec_duplicate_constant

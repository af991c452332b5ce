// A constant list of device ids with a repeated id is a compile error, as a string with one is.
// expect: device_ids_must_be_unique
#include <volt/accelerators/device_spec.hpp>

namespace accelerators_device_spec_duplicate_list {

int use() {
#ifndef VOLT_COMPILE_FAIL_CONTROL
  constexpr volt::DeviceSpec spec = volt::devices({2, 0, 2});
#else
  constexpr volt::DeviceSpec spec = volt::devices({2, 0, 1});
#endif
  return spec.ids().size();
}

}  // namespace accelerators_device_spec_duplicate_list

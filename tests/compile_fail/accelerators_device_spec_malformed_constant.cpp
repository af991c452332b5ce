// A malformed constant device spec string is a compile error (int("1.5") raises ValueError in Lightning).
// expect: invalid_literal_for_int_with_base_10
#include <volt/accelerators/device_spec.hpp>

namespace accelerators_device_spec_malformed_constant {

int use() {
#ifndef VOLT_COMPILE_FAIL_CONTROL
  constexpr volt::DeviceSpec spec{"1.5"};
#else
  constexpr volt::DeviceSpec spec{"1, 5"};
#endif
  return spec.ids().size();
}

}  // namespace accelerators_device_spec_malformed_constant

// DeviceSpec{true} must not compile: Lightning refuses bool devices with a TypeError.
// expect: use of deleted function .+volt::DeviceSpec::DeviceSpec\(T\) \[with T = bool\]
#include <volt/accelerators/device_spec.hpp>

namespace accelerators_device_spec_bool {

int use() {
#ifndef VOLT_COMPILE_FAIL_CONTROL
  volt::DeviceSpec spec{true};
#else
  volt::DeviceSpec spec{1};
#endif
  return spec.count();
}

}  // namespace accelerators_device_spec_bool

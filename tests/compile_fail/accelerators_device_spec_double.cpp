// DeviceSpec{1.5} must not compile: Lightning refuses float devices with a TypeError.
// expect: use of deleted function .+volt::DeviceSpec::DeviceSpec\(T\) \[with T = double\]
#include <volt/accelerators/device_spec.hpp>

namespace accelerators_device_spec_double {

int use() {
#ifndef VOLT_COMPILE_FAIL_CONTROL
  volt::DeviceSpec spec{1.5};
#else
  volt::DeviceSpec spec{1};
#endif
  return spec.count();
}

}  // namespace accelerators_device_spec_double

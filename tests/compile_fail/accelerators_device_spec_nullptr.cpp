// DeviceSpec{nullptr} must not compile: Lightning refuses devices=None with a TypeError.
// expect: use of deleted function .+volt::DeviceSpec::DeviceSpec\(std::nullptr_t\)
#include <volt/accelerators/device_spec.hpp>

namespace accelerators_device_spec_nullptr {

int use() {
#ifndef VOLT_COMPILE_FAIL_CONTROL
  volt::DeviceSpec spec{nullptr};
#else
  volt::DeviceSpec spec{"1"};
#endif
  return spec.count();
}

}  // namespace accelerators_device_spec_nullptr

// expect: volt: FP64 is not supported on the MPS accelerator \(Metal has no float64\); use volt::FP32
#include <volt/volt.hpp>

namespace fabric_mps_fp64 {

#ifdef VOLT_COMPILE_FAIL_CONTROL
using Precision = volt::FP32;
#else
using Precision = volt::FP64;
#endif

volt::Fabric<volt::MPS, volt::SingleDevice, Precision>* fabric_pointer(volt::FabricOptions options) {
  return new volt::Fabric<volt::MPS, volt::SingleDevice, Precision>(options);
}

}  // namespace fabric_mps_fp64

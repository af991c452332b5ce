// float64 on an MPS accelerator is refused at compile time: Metal has no float64.
// expect: volt: FP64 is not supported on the MPS accelerator \(Metal has no float64\). use volt::FP32
#include <volt/precision/compatibility.hpp>

namespace volt {
struct MPS;
}

namespace precision_mps_fp64 {

void use() {
#ifndef VOLT_COMPILE_FAIL_CONTROL
  volt::check_precision_supported<volt::MPS, volt::FP64>();
#else
  volt::check_precision_supported<volt::MPS, volt::FP32>();
#endif
}

}  // namespace precision_mps_fp64

// fp16 autocast on a CPU accelerator known at compile time is refused, naming the fix.
// expect: volt: FP16Autocast is not supported on the CPU accelerator. use volt::BF16Autocast
#include <volt/precision/compatibility.hpp>

namespace volt {
struct CPU;
}

namespace precision_cpu_fp16_autocast {

void use() {
#ifndef VOLT_COMPILE_FAIL_CONTROL
  volt::check_precision_supported<volt::CPU, volt::FP16Autocast>();
#else
  volt::check_precision_supported<volt::CPU, volt::BF16Autocast>();
#endif
}

}  // namespace precision_cpu_fp16_autocast

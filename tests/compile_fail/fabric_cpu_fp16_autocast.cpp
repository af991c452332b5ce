// expect: volt: FP16Autocast is not supported on the CPU accelerator; use volt::BF16Autocast
#include <volt/volt.hpp>

namespace fabric_cpu_fp16_autocast {

#ifdef VOLT_COMPILE_FAIL_CONTROL
using Precision = volt::BF16Autocast;
#else
using Precision = volt::FP16Autocast;
#endif

volt::Fabric<volt::CPU, volt::SingleDevice, Precision>* fabric_pointer(volt::FabricOptions options) {
  return new volt::Fabric<volt::CPU, volt::SingleDevice, Precision>(options);
}

}  // namespace fabric_cpu_fp16_autocast

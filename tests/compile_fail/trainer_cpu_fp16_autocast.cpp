// expect: volt: FP16Autocast is not supported on the CPU accelerator; use volt::BF16Autocast
#include <volt/volt.hpp>

namespace trainer_cpu_fp16_autocast {

#ifdef VOLT_COMPILE_FAIL_CONTROL
using Precision = volt::BF16Autocast;
#else
using Precision = volt::FP16Autocast;
#endif

volt::Trainer<volt::CPU, volt::SingleDevice, Precision>* trainer_pointer(volt::TrainerOptions options) {
  return new volt::Trainer<volt::CPU, volt::SingleDevice, Precision>(options);
}

}  // namespace trainer_cpu_fp16_autocast

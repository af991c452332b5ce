// expect: volt: FP64 is not supported on the MPS accelerator
#include <volt/volt.hpp>

namespace trainer_mps_fp64 {

#ifdef VOLT_COMPILE_FAIL_CONTROL
using Precision = volt::FP32;
#else
using Precision = volt::FP64;
#endif

volt::Trainer<volt::MPS, volt::SingleDevice, Precision>* trainer_pointer(volt::TrainerOptions options) {
  return new volt::Trainer<volt::MPS, volt::SingleDevice, Precision>(options);
}

}  // namespace trainer_mps_fp64

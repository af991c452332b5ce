// expect: volt: DDP family strategies are not supported on the MPS accelerator; use volt::SingleDevice
#include <volt/volt.hpp>

namespace trainer_mps_ddp {

#ifdef VOLT_COMPILE_FAIL_CONTROL
using Strategy = volt::SingleDevice;
#else
using Strategy = volt::DDP;
#endif

volt::Trainer<volt::MPS, Strategy>* trainer_pointer(volt::TrainerOptions options) {
  return new volt::Trainer<volt::MPS, Strategy>(options);
}

}  // namespace trainer_mps_ddp

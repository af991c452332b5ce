// expect: volt: DDP family strategies are not supported on the MPS accelerator; use volt::SingleDevice
#include <volt/volt.hpp>

namespace fabric_mps_ddp {

#ifdef VOLT_COMPILE_FAIL_CONTROL
using Strategy = volt::SingleDevice;
#else
using Strategy = volt::DDP;
#endif

volt::Fabric<volt::MPS, Strategy>* fabric_pointer(volt::FabricOptions options) {
  return new volt::Fabric<volt::MPS, Strategy>(options);
}

}  // namespace fabric_mps_ddp

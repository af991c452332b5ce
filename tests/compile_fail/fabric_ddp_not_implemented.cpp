// expect: volt: this version of volt runs Fabric with volt::SingleDevice only
#include <volt/volt.hpp>

#ifdef VOLT_COMPILE_FAIL_CONTROL
using Strategy = volt::SingleDevice;
#else
using Strategy = volt::DDP;
#endif

volt::Fabric<volt::CPU, Strategy>* fabric_pointer(volt::FabricOptions options) {
  return new volt::Fabric<volt::CPU, Strategy>(options);
}

// MPS with a DDP-family strategy must not compile (Lightning: "strategies from the DDP family are not
// supported on the MPS accelerator").
// expect: volt: DDP family strategies are not supported on the MPS accelerator; use volt::SingleDevice
#include <volt/strategies/compatibility.hpp>
#include <volt/strategies/ddp.hpp>
#include <volt/strategies/single_device.hpp>

namespace accelerators_mps_ddp {

void use() {
#ifndef VOLT_COMPILE_FAIL_CONTROL
  volt::check_strategy_supported<volt::MPS, volt::DDP>();
#else
  volt::check_strategy_supported<volt::MPS, volt::SingleDevice>();
#endif
}

}  // namespace accelerators_mps_ddp

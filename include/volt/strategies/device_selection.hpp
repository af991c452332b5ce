/// \file
/// The devices a strategy runs on: the accelerator connector's selection plus each strategy's rules, written
/// once for the Trainer and Fabric; implementation, no public API.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/accelerators/accelerator.hpp>
#include <volt/accelerators/connector.hpp>
#include <volt/accelerators/device_spec.hpp>
#include <volt/core/errors.hpp>
#include <volt/strategies/compatibility.hpp>

#include <stdexcept>
#include <string>

namespace volt::detail {

/// The selection's device ids as "0, 1, 2", for messages.
VOLT_INLINE std::string device_id_list(const DeviceSelection& selection);

/// What a host's constructor does to find the devices of its `Strategy` on `Accelerator`, in the order each
/// host has always done it:
///
/// 1. Fabric only: check_strategy_supported_on_machine (std::invalid_argument for the DDP family where MPS
///    is available and the accelerator is chosen at run time).
/// 2. "auto" means every device of the accelerator, so a strategy that is not distributed takes 1 device.
/// 3. select_devices<Accelerator>(devices, frontend), with the frontend's messages and exception types.
/// 4. A strategy that is not distributed must have exactly one device: the Trainer throws
///    MisconfigurationError ("volt::SingleDevice trains on exactly one device, ..."; it does not check
///    `num_nodes`), Fabric std::invalid_argument ("volt::SingleDevice runs on exactly one device of one node,
///    ...", also when `num_nodes` is not 1).
/// 5. Trainer only: check_strategy_supported_on_machine.
template <class Accelerator, class Strategy>
DeviceSelection select_strategy_devices(const DeviceSpec& devices, int num_nodes, Frontend frontend) {
  constexpr bool distributed = is_distributed_strategy<Strategy>();
  if (frontend == Frontend::fabric) check_strategy_supported_on_machine<Accelerator, Strategy>();
  DeviceSelection selection = select_devices<Accelerator>(!distributed && devices.is_auto() ? DeviceSpec{1} : devices,
                                                          frontend);
  if constexpr (!distributed) {
    const std::string count = std::to_string(selection.parallel_devices.size());
    const std::string accelerator(to_string(selection.accelerator));
    if (frontend == Frontend::fabric) {
      if (selection.parallel_devices.size() != 1 || num_nodes != 1) {
        throw std::invalid_argument("volt::SingleDevice runs on exactly one device of one node, but the options selected " +
                                    count + " " + accelerator + " device(s) [" + device_id_list(selection) +
                                    "] on num_nodes=" + std::to_string(num_nodes) +
                                    ". Pass {.devices = 1} (or a single id such as volt::devices({1})) and num_nodes = 1.");
      }
    } else if (selection.parallel_devices.size() != 1) {
      throw MisconfigurationError("volt::SingleDevice trains on exactly one device, but the device spec selected " +
                                  count + " " + accelerator + " devices: [" + device_id_list(selection) +
                                  "]. Pass {.devices = 1} (or a single id such as volt::devices({1})), or "
                                  "train with volt::DDP.");
    }
  }
  if (frontend == Frontend::trainer) check_strategy_supported_on_machine<Accelerator, Strategy>();
  return selection;
}

// With VOLT_SEPARATE_COMPILATION the selection for volt's own accelerators and strategies is compiled once.
#if defined(VOLT_DETAIL_INSTANTIATE)
#define VOLT_DETAIL_SELECTION(A)                                                                                 \
  VOLT_DETAIL_INSTANTIATE DeviceSelection select_strategy_devices<A, SingleDevice>(const DeviceSpec&, int, Frontend); \
  VOLT_DETAIL_INSTANTIATE DeviceSelection select_strategy_devices<A, DDP>(const DeviceSpec&, int, Frontend);
VOLT_DETAIL_SELECTION(Auto) VOLT_DETAIL_SELECTION(GPU) VOLT_DETAIL_SELECTION(CPU) VOLT_DETAIL_SELECTION(CUDA)
VOLT_DETAIL_SELECTION(MPS)
#undef VOLT_DETAIL_SELECTION
#endif

}  // namespace volt::detail

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/strategies/impl/device_selection.ipp>
#endif

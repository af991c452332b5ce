/// \file
/// The accelerator connector (Lightning's trainer/connectors/accelerator_connector.py): the torch flags the
/// options set (seed, math modes), the devices the strategy trains on, and the device lines.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/accelerators.hpp>
#include <volt/core/errors.hpp>
#include <volt/strategies.hpp>
#include <volt/trainer/options.hpp>

#include <torch/torch.h>

#include <functional>
#include <map>
#include <string>

namespace volt::detail {

/// Seeds (TrainerOptions::seed) and sets the math modes (float32 matmul precision, cuDNN benchmark,
/// deterministic algorithms), as the options ask.
VOLT_INLINE void set_torch_flags(const TrainerOptions& options);

/// The devices the Trainer trains on: the options' device spec for the accelerator, with the strategy's
/// rules (strategies/device_selection.hpp). Throws MisconfigurationError.
template <class Accelerator, class Strategy>
DeviceSelection select_trainer_devices(const TrainerOptions& options) {
  return select_strategy_devices<Accelerator, Strategy>(options.devices, options.num_nodes, Frontend::trainer);
}

/// The accelerator's device statistics of `device` (DeviceStatsMonitor reads them through TrainerState).
VOLT_INLINE std::function<std::map<std::string, double>()> device_stats_probe(AcceleratorKind accelerator,
                                                                              torch::Device device);

}  // namespace volt::detail

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/trainer/connectors/impl/accelerator_connector.ipp>
#endif

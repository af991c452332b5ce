/// \file
/// Device selection for the Trainer and Fabric: Lightning's accelerator connector, as far as accelerators
/// and devices go (spec 1.6, 3.1 steps 3-5, 3.3, 3.5).
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/accelerators/accelerator.hpp>
#include <volt/accelerators/auto.hpp>
#include <volt/accelerators/cpu.hpp>
#include <volt/accelerators/cuda.hpp>
#include <volt/accelerators/device_spec.hpp>
#include <volt/accelerators/mps.hpp>
#include <volt/core/errors.hpp>
#include <volt/core/log.hpp>

#include <torch/torch.h>

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace volt {

/// The devices a Trainer or Fabric runs on.
struct DeviceSelection {
  /// The accelerator the devices belong to.
  AcceleratorKind accelerator = AcceleratorKind::cpu;
  /// One device per process, in the order asked for (CPU: n times torch::Device("cpu")).
  std::vector<torch::Device> parallel_devices;
  /// Lightning's trainer.device_ids: each device's index, or its position when the index is absent or 0
  /// (Python's `device.index or idx`), so CPU gives {0, 1, 2} and CUDA {3, 0} gives {3, 1}.
  std::vector<int> device_ids;

  /// The first parallel device. Precondition: parallel_devices is not empty (select_devices guarantees it).
  torch::Device root_device() const { return parallel_devices.front(); }
  /// Lightning's trainer.num_devices.
  int num_devices() const { return static_cast<int>(device_ids.size()); }
};

namespace detail {

VOLT_INLINE std::string_view frontend_class(Frontend frontend);

/// Lightning's check of devices in ([], 0, "0") before parsing; volt applies it to every spec that
/// selects no device (also " 0 " and "[]", which make Lightning fail later with a TypeError).
[[noreturn]] VOLT_INLINE void throw_no_devices(const DeviceSpec& devices, std::string_view accelerator_name,
                                              Frontend frontend);
VOLT_INLINE void reject_no_devices(const DeviceSpec& devices, std::string_view accelerator_name, Frontend frontend);

VOLT_INLINE std::string_view accelerator_class_name(AcceleratorKind kind);

VOLT_INLINE std::string_view policy_name(AcceleratorKind kind);

/// Lightning's availability error (spec 3.3) with the available accelerators in volt's selection order
/// and a hint at the usual causes.
[[noreturn]] VOLT_INLINE void throw_accelerator_unavailable(AcceleratorKind kind, Frontend frontend);

VOLT_INLINE std::vector<int> device_ids_of(const std::vector<torch::Device>& devices);

}  // namespace detail

/// Chooses the accelerator and the devices, in Lightning's order:
///   1. Trainer: resolve Auto/GPU, then refuse a spec that selects no device (0, "0", volt::devices({}));
///      Fabric: refuse first (the message names "auto"/"gpu"), then resolve;
///   2. the accelerator must be available (spec 3.3 message, listing the available accelerators);
///   3. DeviceSpec{} ("auto") becomes the accelerator's auto_device_count();
///   4. parse_devices, then get_parallel_devices.
/// Throws (Trainer / Fabric): MisconfigurationError / std::runtime_error "No supported gpu backend found!";
/// MisconfigurationError / std::invalid_argument "`volt::Trainer({.devices = 0})` value is not a valid
/// input using cuda accelerator. ..."; MisconfigurationError / std::runtime_error "`MPSAccelerator` can not
/// run on your system since the accelerator is not available. ..."; and what parse_devices throws (GPU
/// parsers: MisconfigurationError in both; CPU: std::invalid_argument).
template <AcceleratorChoice Accelerator>
DeviceSelection select_devices(const DeviceSpec& devices, Frontend frontend = Frontend::trainer) {
  if (frontend == Frontend::fabric) detail::reject_no_devices(devices, Accelerator::name, frontend);
  const AcceleratorKind kind = resolve_accelerator<Accelerator>(frontend);
  if (frontend == Frontend::trainer) detail::reject_no_devices(devices, to_string(kind), frontend);

  return visit_accelerator(kind, [&](auto policy) {
    using Policy = decltype(policy);
    if (!Policy::is_available()) detail::throw_accelerator_unavailable(kind, frontend);
    const DeviceSpec resolved = devices.is_auto() ? DeviceSpec{Policy::auto_device_count()} : devices;
    const std::optional<std::vector<int>> ids = Policy::parse_devices(resolved);
    if (!ids) detail::throw_no_devices(resolved, to_string(kind), frontend);
    DeviceSelection selection;
    selection.accelerator = kind;
    selection.parallel_devices = Policy::get_parallel_devices(*ids);
    selection.device_ids = detail::device_ids_of(selection.parallel_devices);
    return selection;
  });
}

/// Lightning's `_log_device_info` at Trainer construction (Fabric prints nothing): the rank-zero info line
/// "GPU available: True (cuda), used: True" (CUDA is named before MPS, as in Lightning), and, once per
/// process on rank zero, the warning "GPU available but not used. ..." when a CUDA or MPS device is
/// available but `used` is another accelerator. volt prints no TPU line: it has no TPU support.
VOLT_INLINE void log_device_info(AcceleratorKind used);

}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/accelerators/impl/connector.ipp>
#endif

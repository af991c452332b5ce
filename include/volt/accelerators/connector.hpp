/// \file
/// Device selection for the Trainer and Fabric: Lightning's accelerator connector, as far as accelerators
/// and devices go (spec 1.6, 3.1 steps 3-5, 3.3, 3.5).
#pragma once

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

inline std::string_view frontend_class(Frontend frontend) {
  return frontend == Frontend::fabric ? "Fabric" : "Trainer";
}

/// Lightning's check of devices in ([], 0, "0") before parsing; volt applies it to every spec that
/// selects no device (also " 0 " and "[]", which make Lightning fail later with a TypeError).
[[noreturn]] inline void throw_no_devices(const DeviceSpec& devices, std::string_view accelerator_name,
                                         Frontend frontend) {
  const std::string message =
      "`volt::" + std::string(frontend_class(frontend)) + "({.devices = " + devices.cpp_expression() +
      "})` value is not a valid input using " + std::string(accelerator_name) +
      " accelerator. Ask for at least one device: a count > 0, -1 for every device, or ids such as "
      "volt::devices({0}) (Lightning: `" + std::string(frontend_class(frontend)) +
      "(devices=" + devices.python_repr() + ")`).";
  if (frontend == Frontend::fabric) throw std::invalid_argument(message);
  throw MisconfigurationError(message);
}
inline void reject_no_devices(const DeviceSpec& devices, std::string_view accelerator_name, Frontend frontend) {
  if (devices.selects_none()) throw_no_devices(devices, accelerator_name, frontend);
}

inline std::string_view accelerator_class_name(AcceleratorKind kind) {
  switch (kind) {
    case AcceleratorKind::cuda: return "CUDAAccelerator";
    case AcceleratorKind::mps: return "MPSAccelerator";
    case AcceleratorKind::cpu: break;
  }
  return "CPUAccelerator";
}

inline std::string_view policy_name(AcceleratorKind kind) {
  switch (kind) {
    case AcceleratorKind::cuda: return "volt::CUDA";
    case AcceleratorKind::mps: return "volt::MPS";
    case AcceleratorKind::cpu: break;
  }
  return "volt::CPU";
}

/// Lightning's availability error (spec 3.3) with the available accelerators in volt's selection order
/// and a hint at the usual causes.
[[noreturn]] inline void throw_accelerator_unavailable(AcceleratorKind kind, Frontend frontend) {
  std::string names = "[";
  std::string policies;
  for (AcceleratorKind candidate : {AcceleratorKind::mps, AcceleratorKind::cuda, AcceleratorKind::cpu}) {
    const bool available = candidate == AcceleratorKind::mps    ? MPS::is_available()
                           : candidate == AcceleratorKind::cuda ? CUDA::is_available()
                                                                : CPU::is_available();
    if (!available) continue;
    if (names.size() > 1) {
      names += ", ";
      policies += ", ";
    }
    names += '\'';
    names += to_string(candidate);
    names += '\'';
    policies += policy_name(candidate);
  }
  names += "]";
  std::string message = "`" + std::string(accelerator_class_name(kind)) +
                        "` can not run on your system since the accelerator is not available. The following "
                        "accelerator(s) is available and can be passed as the Accelerator template argument of `volt::" +
                        std::string(frontend_class(frontend)) + "`: " + names + " (" + policies + ").";
  if (kind == AcceleratorKind::mps) {
    message +=
        " MPS needs an Apple-silicon Mac with macOS 12.3 or later, a process running natively on arm64 (not "
        "under Rosetta), a LibTorch built with MPS, and DISABLE_MPS not set to 1.";
  } else if (kind == AcceleratorKind::cuda) {
    message +=
        " CUDA needs a LibTorch built with CUDA and at least one visible NVIDIA GPU (check nvidia-smi and "
        "CUDA_VISIBLE_DEVICES).";
  }
  if (frontend == Frontend::fabric) throw std::runtime_error(message);
  throw MisconfigurationError(message);
}

inline std::vector<int> device_ids_of(const std::vector<torch::Device>& devices) {
  std::vector<int> ids;
  ids.reserve(devices.size());
  for (std::size_t position = 0; position < devices.size(); ++position) {
    const torch::Device& device = devices[position];
    ids.push_back(device.has_index() && device.index() != 0 ? device.index() : static_cast<int>(position));
  }
  return ids;
}

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
inline void log_device_info(AcceleratorKind used) {
  const bool cuda_available = CUDA::is_available();
  const bool mps_available = MPS::is_available();
  const std::string_view gpu_type = cuda_available ? " (cuda)" : mps_available ? " (mps)" : "";
  const bool gpu_used = used == AcceleratorKind::cuda || used == AcceleratorKind::mps;
  auto python_bool = [](bool value) { return value ? std::string("True") : std::string("False"); };
  log::info_rank_zero("GPU available: " + python_bool(cuda_available || mps_available) + std::string(gpu_type) +
                      ", used: " + python_bool(gpu_used));
  if ((cuda_available && used != AcceleratorKind::cuda) || (mps_available && used != AcceleratorKind::mps)) {
    log::warn_once(
        "GPU available but not used. You can set it by doing `volt::Trainer<volt::GPU>` (or volt::CUDA / "
        "volt::MPS as the Accelerator template argument; Lightning: `Trainer(accelerator='gpu')`).");
  }
}

}  // namespace volt

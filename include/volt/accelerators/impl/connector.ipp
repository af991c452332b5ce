/// \file
/// Definitions of the functions declared in volt/accelerators/connector.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE std::string_view frontend_class(Frontend frontend) {
  return frontend == Frontend::fabric ? "Fabric" : "Trainer";
}

VOLT_INLINE void reject_no_devices(const DeviceSpec& devices, std::string_view accelerator_name, Frontend frontend) {
  if (devices.selects_none()) throw_no_devices(devices, accelerator_name, frontend);
}

VOLT_INLINE std::string_view accelerator_class_name(AcceleratorKind kind) {
  switch (kind) {
    case AcceleratorKind::cuda: return "CUDAAccelerator";
    case AcceleratorKind::mps: return "MPSAccelerator";
    case AcceleratorKind::cpu: break;
  }
  return "CPUAccelerator";
}

VOLT_INLINE std::string_view policy_name(AcceleratorKind kind) {
  switch (kind) {
    case AcceleratorKind::cuda: return "volt::CUDA";
    case AcceleratorKind::mps: return "volt::MPS";
    case AcceleratorKind::cpu: break;
  }
  return "volt::CPU";
}

VOLT_INLINE std::vector<int> device_ids_of(const std::vector<torch::Device>& devices) {
  std::vector<int> ids;
  ids.reserve(devices.size());
  for (std::size_t position = 0; position < devices.size(); ++position) {
    const torch::Device& device = devices[position];
    ids.push_back(device.has_index() && device.index() != 0 ? device.index() : static_cast<int>(position));
  }
  return ids;
}
}  // namespace volt::detail

namespace volt {

VOLT_INLINE void log_device_info(AcceleratorKind used) {
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

namespace volt::detail {

[[noreturn]] VOLT_INLINE void throw_no_devices(const DeviceSpec& devices, std::string_view accelerator_name,
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

[[noreturn]] VOLT_INLINE void throw_accelerator_unavailable(AcceleratorKind kind, Frontend frontend) {
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

}  // namespace volt::detail

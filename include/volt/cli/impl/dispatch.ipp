/// \file
/// Definitions of the functions declared in volt/cli/dispatch.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::cli {

VOLT_INLINE std::string mps_unavailable_reason() {
  if (MPS::is_available()) return {};
  const char* disable = std::getenv("DISABLE_MPS");
  if (disable != nullptr && std::string_view(disable) == "1") return "DISABLE_MPS=1 is set; unset it";
  if (!machine::torch_mps_available()) {
#ifdef __APPLE__
    return "LibTorch reports no MPS (a LibTorch built without MPS, or macOS older than 12.3)";
#else
    return "MPS exists only on Apple-silicon Macs, and this is not macOS";
#endif
  }
  const std::string processor = machine::processor();
  return "the process runs as '" + processor +
         "', not natively on arm64 (an x86-64 build under Rosetta); build and run it for arm64";
}
}  // namespace volt::cli

namespace volt::cli::detail {

VOLT_INLINE std::string_view accelerator_flag_class(AcceleratorKind kind) {
  return volt::detail::accelerator_class_name(kind);
}

VOLT_INLINE bool available(AcceleratorKind kind) {
  switch (kind) {
    case AcceleratorKind::cuda: return CUDA::is_available();
    case AcceleratorKind::mps: return MPS::is_available();
    case AcceleratorKind::cpu: break;
  }
  return true;
}

VOLT_INLINE std::string available_accelerators() {
  std::string names;
  for (AcceleratorKind kind : {AcceleratorKind::mps, AcceleratorKind::cuda, AcceleratorKind::cpu}) {
    if (!available(kind)) continue;
    if (!names.empty()) names += ", ";
    names += detail::quoted(to_string(kind));
  }
  return "[" + names + "]";
}

VOLT_INLINE AcceleratorKind resolve_accelerator_flag(const std::string& flag) {
  const std::string choices = ". Valid choices: " + join(accelerator_choices) + "; available here: " +
                              available_accelerators() + ".";
  if (flag == "auto") return Auto::resolve();
  if (flag == "gpu") {
    if (MPS::is_available()) return AcceleratorKind::mps;
    if (CUDA::is_available()) return AcceleratorKind::cuda;
    throw UsageError("argument --accelerator gpu: No supported gpu backend found!" + choices);
  }
  const AcceleratorKind kind = flag == "cuda" ? AcceleratorKind::cuda
                               : flag == "mps" ? AcceleratorKind::mps
                                               : AcceleratorKind::cpu;
  if (!available(kind)) {
    std::string message = "argument --accelerator " + flag + ": `" + std::string(accelerator_flag_class(kind)) +
                          "` can not run on your system since the accelerator is not available. The following "
                          "accelerator(s) is available and can be passed into `--accelerator`: " +
                          available_accelerators() + ".";
    if (kind == AcceleratorKind::mps) message += " MPS is not available: " + cli::mps_unavailable_reason() + ".";
    if (kind == AcceleratorKind::cuda) {
      message += compat::built_with_cuda ? " No CUDA device is visible (check nvidia-smi and CUDA_VISIBLE_DEVICES)."
                                         : " This program was built against a LibTorch without CUDA.";
    }
    throw UsageError(message + " Run the doctor example for details.");
  }
  return kind;
}

VOLT_INLINE std::string effective_precision(const std::string& precision, AcceleratorKind kind) {
  if (precision == "16-mixed" && kind == AcceleratorKind::cpu) {
    log::warn_rank_zero(
        "You passed `--precision 16-mixed` and the accelerator is the CPU, but AMP with fp16 is not supported on "
        "CPU. Using `precision='bf16-mixed'` instead.");
    return "bf16-mixed";
  }
  return precision;
}

VOLT_INLINE c10::DeviceType device_type_of(AcceleratorKind kind) {
  switch (kind) {
    case AcceleratorKind::cuda: return c10::DeviceType::CUDA;
    case AcceleratorKind::mps: return c10::DeviceType::MPS;
    case AcceleratorKind::cpu: break;
  }
  return c10::DeviceType::CPU;
}

}  // namespace volt::cli::detail

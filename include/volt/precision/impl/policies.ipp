/// \file
/// Definitions of the functions declared in volt/precision/policies.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt {

VOLT_INLINE void FP64::setup(torch::Device root_device) {
  if (root_device.is_mps()) {
    throw MisconfigurationError("volt: FP64 is not supported on MPS devices (Metal has no float64); use volt::FP32");
  }
}

VOLT_INLINE void FP16True::setup(torch::Device root_device) {
  if (!root_device.is_cpu()) return;
  try {
    const auto probe = torch::ones({2, 2}, torch::TensorOptions().dtype(torch::kHalf));
    (void)torch::addmm(probe, probe, probe);
  } catch (const std::exception& error) {
    std::string reason = error.what();
    reason = reason.substr(0, reason.find('\n'));
    throw MisconfigurationError("volt: precision '16-true' on the CPU needs float16 matrix multiplication, "
                                "which this LibTorch (" + std::string(compat::torch_version_string) +
                                ") does not have on the CPU (" + reason +
                                "); use 'bf16-true', 'bf16-mixed' or '32-true' on the CPU, or train on a GPU");
  }
}

}  // namespace volt

/// \file
/// Definitions of the functions declared in volt/accelerators/auto.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt {

VOLT_INLINE auto Auto::resolve(Frontend /*frontend*/) -> AcceleratorKind {
  if (MPS::is_available()) return AcceleratorKind::mps;
  if (CUDA::is_available()) return AcceleratorKind::cuda;
  return AcceleratorKind::cpu;
}

VOLT_INLINE auto GPU::resolve(Frontend frontend) -> AcceleratorKind {
  if (MPS::is_available()) return AcceleratorKind::mps;
  if (CUDA::is_available()) return AcceleratorKind::cuda;
  if (frontend == Frontend::fabric) throw std::runtime_error("No supported gpu backend found!");
  throw MisconfigurationError("No supported gpu backend found!");
}

}  // namespace volt

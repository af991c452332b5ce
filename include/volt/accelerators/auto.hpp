/// \file
/// volt::Auto and volt::GPU: accelerators chosen at run time, and the bridge from a run-time choice back to
/// the static policies (visit_accelerator).
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/accelerators/accelerator.hpp>
#include <volt/accelerators/cpu.hpp>
#include <volt/accelerators/cuda.hpp>
#include <volt/accelerators/mps.hpp>
#include <volt/core/errors.hpp>

#include <stdexcept>
#include <string_view>
#include <utility>

namespace volt {

/// Lightning's accelerator="auto" (the Trainer's default): MPS if available, then CUDA, then CPU.
/// (Lightning tries TPU first; volt has no TPU support.)
struct Auto {
  /// The value Lightning's `accelerator=` takes for this choice.
  static constexpr std::string_view name = "auto";
  /// Picks MPS, CUDA or CPU on this machine, at the call (Trainer and Fabric call it once, at construction, on
  /// every rank). Never throws: CPU is always there.
  static AcceleratorKind resolve(Frontend /*frontend*/ = Frontend::trainer);
};

/// Lightning's accelerator="gpu": MPS if available, then CUDA. Throws MisconfigurationError
/// "No supported gpu backend found!" when neither is (Fabric: std::runtime_error, same text).
struct GPU {
  /// The value Lightning's `accelerator=` takes for this choice.
  static constexpr std::string_view name = "gpu";
  /// Picks MPS or CUDA on this machine, at the call. Throws MisconfigurationError (Frontend::fabric:
  /// std::runtime_error) "No supported gpu backend found!" when neither is available.
  static AcceleratorKind resolve(Frontend frontend = Frontend::trainer);
};

/// The accelerator an Accelerator parameter stands for: CPU, CUDA and MPS (and any AcceleratorPolicy)
/// are their own kind; Auto and GPU (any AcceleratorSelector) choose on this machine, now. Throws what
/// the selector throws (GPU: "No supported gpu backend found!").
template <AcceleratorChoice A>
AcceleratorKind resolve_accelerator(Frontend frontend = Frontend::trainer) {
  if constexpr (AcceleratorPolicy<A>) {
    return A::kind;
  } else {
    return A::resolve(frontend);
  }
}

/// Calls `f(volt::CPU{})`, `f(volt::CUDA{})` or `f(volt::MPS{})` for `kind` and returns what it returns;
/// `f` must return the same type for the three policies (a generic lambda usually does).
template <class F>
decltype(auto) visit_accelerator(AcceleratorKind kind, F&& f) {
  switch (kind) {
    case AcceleratorKind::cuda: return std::forward<F>(f)(CUDA{});
    case AcceleratorKind::mps: return std::forward<F>(f)(MPS{});
    case AcceleratorKind::cpu: break;
  }
  return std::forward<F>(f)(CPU{});
}

}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/accelerators/impl/auto.ipp>
#endif

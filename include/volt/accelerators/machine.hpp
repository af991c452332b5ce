/// \file
/// The machine probes every accelerator reads: how many CUDA devices are visible, whether LibTorch reports
/// MPS, and the processor architecture. They answer from the real machine unless a
/// volt::testing::ScopedMachine (volt/testing/scoped_machine.hpp) is alive, which lets tests run the
/// CUDA and MPS code paths on any machine. Nothing else is faked: no tensor is ever created on a fake device.
#pragma once

#include <volt/core/compat.hpp>

#include <mutex>
#include <string>

#ifdef __APPLE__
#include <sys/sysctl.h>
#include <sys/types.h>
#endif

/// The machine probes the accelerators read (CUDA device count, MPS availability, processor), fakeable in
/// tests through volt::testing::ScopedMachine.
namespace volt::machine {

/// What a faked machine reports. Fields left out describe a machine without GPUs whose processor is
/// arm64 (so `.torch_mps_available = true` alone is an Apple-silicon machine).
struct FakeMachine {
  /// What machine::cuda_device_count() returns (CUDA::is_available() is true when it is above 0).
  int cuda_device_count = 0;
  /// What machine::torch_mps_available() returns (LibTorch's own MPS check).
  bool torch_mps_available = false;
  /// What machine::processor() returns; MPS needs "arm" or "arm64".
  std::string processor = "arm64";
};

namespace detail {
struct ProbeState {
  std::mutex mutex;
  const FakeMachine* fake = nullptr;
  int mps_available_cache = -1;  // -1: not computed yet; MPS::is_available() caches like Lightning's lru_cache
};
inline ProbeState& probe_state() {
  static ProbeState state;
  return state;
}

/// The architecture this process runs as, named as Python's platform.processor() names it on macOS
/// ("arm" natively on Apple silicon, "i386" for an x86-64 process, also under Rosetta). On other systems
/// volt names the compiled architecture ("arm64", "x86_64", ...).
inline std::string real_processor() {
#if defined(__APPLE__)
  int translated = 0;
  std::size_t size = sizeof(translated);
  // sysctl.proc_translated is 1 for a process that Rosetta translates; it is absent on Intel Macs.
  if (sysctlbyname("sysctl.proc_translated", &translated, &size, nullptr, 0) == 0 && translated == 1) return "i386";
#if defined(__aarch64__) || defined(__arm64__)
  return "arm";
#else
  return "i386";
#endif
#elif defined(__aarch64__) || defined(__arm64__)
  return "arm64";
#elif defined(__arm__)
  return "arm";
#elif defined(__x86_64__) || defined(_M_X64)
  return "x86_64";
#elif defined(__i386__) || defined(_M_IX86)
  return "i386";
#else
  return "";
#endif
}
}  // namespace detail

/// Number of CUDA devices visible to this process (after CUDA_VISIBLE_DEVICES); 0 without CUDA.
inline int cuda_device_count() {
  {
    auto& state = detail::probe_state();
    std::lock_guard lock(state.mutex);
    if (state.fake != nullptr) return state.fake->cuda_device_count;
  }
  return compat::torch_cuda_device_count();
}

/// LibTorch's own MPS availability (torch::mps::is_available(), or at::hasMPS() on LibTorch 1.13).
inline bool torch_mps_available() {
  {
    auto& state = detail::probe_state();
    std::lock_guard lock(state.mutex);
    if (state.fake != nullptr) return state.fake->torch_mps_available;
  }
  return compat::torch_mps_available();
}

/// The processor architecture as Python's platform.processor() would report it ("arm", "arm64",
/// "x86_64", "i386", ""). MPS needs "arm" or "arm64".
inline std::string processor() {
  {
    auto& state = detail::probe_state();
    std::lock_guard lock(state.mutex);
    if (state.fake != nullptr) return state.fake->processor;
  }
  static const std::string real = detail::real_processor();
  return real;
}

}  // namespace volt::machine

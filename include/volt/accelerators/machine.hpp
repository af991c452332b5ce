/// \file
/// The machine probes every accelerator reads: how many CUDA devices are visible, whether LibTorch reports
/// MPS, and the processor architecture. They answer from the real machine unless a
/// volt::testing::ScopedMachine (volt/testing/scoped_machine.hpp) is alive, which lets tests run the
/// CUDA and MPS code paths on any machine. Nothing else is faked: no tensor is ever created on a fake device.
#pragma once

#include <volt/core/linkage.hpp>
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
VOLT_INLINE ProbeState& probe_state();

/// The architecture this process runs as, named as Python's platform.processor() names it on macOS
/// ("arm" natively on Apple silicon, "i386" for an x86-64 process, also under Rosetta). On other systems
/// volt names the compiled architecture ("arm64", "x86_64", ...).
VOLT_INLINE std::string real_processor();
}  // namespace detail

/// Number of CUDA devices visible to this process (after CUDA_VISIBLE_DEVICES); 0 without CUDA.
VOLT_INLINE int cuda_device_count();

/// LibTorch's own MPS availability (torch::mps::is_available(), or at::hasMPS() on LibTorch 1.13).
VOLT_INLINE bool torch_mps_available();

/// The processor architecture as Python's platform.processor() would report it ("arm", "arm64",
/// "x86_64", "i386", ""). MPS needs "arm" or "arm64".
VOLT_INLINE std::string processor();

}  // namespace volt::machine

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/accelerators/impl/machine.ipp>
#endif

/// \file
/// volt::MPS: Lightning's MPSAccelerator (Apple silicon GPUs through Metal Performance Shaders).
///
/// Operators that LibTorch's MPS backend lacks: set PYTORCH_ENABLE_MPS_FALLBACK=1 in the environment before
/// the process starts (LibTorch then runs them on the CPU), or wrap a single call in
/// volt::with_cpu_fallback (volt/accelerators/fallback.hpp).
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/accelerators/accelerator.hpp>
#include <volt/accelerators/device_parser.hpp>
#include <volt/accelerators/device_spec.hpp>
#include <volt/accelerators/device_stats.hpp>
#include <volt/accelerators/machine.hpp>
#include <volt/core/compat.hpp>

#include <torch/torch.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace volt {

/// Accelerator policy: the one MPS device of an Apple-silicon Mac.
struct MPS {
  /// Lightning's accelerator name, used in messages and by the command line.
  static constexpr std::string_view name = "mps";
  /// What visit_accelerator() and resolve_accelerator() report for this policy.
  static constexpr AcceleratorKind kind = AcceleratorKind::mps;
  /// MPS exposes one device.
  static constexpr int max_devices = 1;

  /// Lightning's rule, cached for the process like its lru_cache: DISABLE_MPS is not exactly "1",
  /// LibTorch reports MPS, and the process runs natively on arm/arm64 (not under Rosetta). Set
  /// DISABLE_MPS before the first call, or call clear_availability_cache().
  static bool is_available();
  /// Forgets the cached availability (Lightning: MPSAccelerator.is_available.cache_clear()).
  static void clear_availability_cache();

  /// 1.
  static int auto_device_count() { return 1; }
  /// {0} when MPS is available, {} otherwise.
  static std::vector<int> available_ids() { return is_available() ? std::vector<int>{0} : std::vector<int>{}; }

  /// Lightning's `_parse_gpu_ids(devices, include_mps=True)`; the same results and errors as
  /// CUDA::parse_devices with the available ids {0} (e.g. devices=2 throws MisconfigurationError
  /// "You requested gpu: [0, 1]\n But your machine only has: [0]").
  static std::optional<std::vector<int>> parse_devices(const DeviceSpec& devices);

  /// torch::Device("mps", i) for i in 0..ids.size()-1: MPS devices are numbered by position, not by id.
  static std::vector<torch::Device> get_parallel_devices(const std::vector<int>& ids);

  /// Throws MisconfigurationError "Device should be MPS, got cpu instead." for a non-MPS device (Fabric:
  /// std::invalid_argument). Nothing else to set up.
  static void setup_device(torch::Device device, Frontend frontend = Frontend::trainer);

  /// Lightning's host-wide figures "M1_vm_percent", "M1_percent" (CPU busy since the previous call),
  /// "M1_swap_percent", plus "mps_current_allocated_bytes" and "mps_driver_allocated_bytes" where LibTorch
  /// exposes the MPS allocator (2.1 and later, on a Mac with MPS). Throws std::runtime_error on systems
  /// other than Linux and macOS.
  static std::map<std::string, double> get_device_stats(torch::Device /*device*/);

  /// Releases the MPS allocator's cached memory (torch.mps.empty_cache()); no-op where unsupported.
  static void empty_cache() { compat::mps_empty_cache(); }
  /// Bytes the MPS allocator holds for tensors; -1 where LibTorch does not tell.
  static std::int64_t allocated_bytes() { return compat::mps_current_allocated_bytes(); }
  /// Bytes the Metal driver holds for this process; -1 where LibTorch does not tell.
  static std::int64_t driver_allocated_bytes() { return compat::mps_driver_allocated_bytes(); }

  /// Nothing to release (Lightning does not clear the MPS cache on teardown).
  static void teardown() {}

 private:
  static bool compute_availability();
};

}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/accelerators/impl/mps.ipp>
#endif

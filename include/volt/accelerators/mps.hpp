/// \file
/// volt::MPS: Lightning's MPSAccelerator (Apple silicon GPUs through Metal Performance Shaders).
///
/// Operators that LibTorch's MPS backend lacks: set PYTORCH_ENABLE_MPS_FALLBACK=1 in the environment before
/// the process starts (LibTorch then runs them on the CPU), or wrap a single call in
/// volt::with_cpu_fallback (volt/accelerators/fallback.hpp).
#pragma once

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
  static bool is_available() {
    auto& state = machine::detail::probe_state();
    {
      std::lock_guard lock(state.mutex);
      if (state.mps_available_cache >= 0) return state.mps_available_cache == 1;
    }
    const bool available = compute_availability();
    std::lock_guard lock(state.mutex);
    if (state.mps_available_cache < 0) state.mps_available_cache = available ? 1 : 0;
    return state.mps_available_cache == 1;
  }
  /// Forgets the cached availability (Lightning: MPSAccelerator.is_available.cache_clear()).
  static void clear_availability_cache() {
    auto& state = machine::detail::probe_state();
    std::lock_guard lock(state.mutex);
    state.mps_available_cache = -1;
  }

  /// 1.
  static int auto_device_count() { return 1; }
  /// {0} when MPS is available, {} otherwise.
  static std::vector<int> available_ids() { return is_available() ? std::vector<int>{0} : std::vector<int>{}; }

  /// Lightning's `_parse_gpu_ids(devices, include_mps=True)`; the same results and errors as
  /// CUDA::parse_devices with the available ids {0} (e.g. devices=2 throws MisconfigurationError
  /// "You requested gpu: [0, 1]\n But your machine only has: [0]").
  static std::optional<std::vector<int>> parse_devices(const DeviceSpec& devices) {
    return detail::parse_gpu_ids(devices, available_ids());
  }

  /// torch::Device("mps", i) for i in 0..ids.size()-1: MPS devices are numbered by position, not by id.
  static std::vector<torch::Device> get_parallel_devices(const std::vector<int>& ids) {
    std::vector<torch::Device> devices;
    devices.reserve(ids.size());
    for (std::size_t position = 0; position < ids.size(); ++position) {
      devices.emplace_back(torch::kMPS, static_cast<c10::DeviceIndex>(position));
    }
    return devices;
  }

  /// Throws MisconfigurationError "Device should be MPS, got cpu instead." for a non-MPS device (Fabric:
  /// std::invalid_argument). Nothing else to set up.
  static void setup_device(torch::Device device, Frontend frontend = Frontend::trainer) {
    detail::check_device_type(device, torch::kMPS, "MPS", true, frontend);
  }

  /// Lightning's host-wide figures "M1_vm_percent", "M1_percent" (CPU busy since the previous call),
  /// "M1_swap_percent", plus "mps_current_allocated_bytes" and "mps_driver_allocated_bytes" where LibTorch
  /// exposes the MPS allocator (2.1 and later, on a Mac with MPS). Throws std::runtime_error on systems
  /// other than Linux and macOS.
  static std::map<std::string, double> get_device_stats(torch::Device /*device*/) {
    std::map<std::string, double> stats{{"M1_vm_percent", detail::host_memory_percent()},
                                        {"M1_percent", detail::host_cpu_percent()},
                                        {"M1_swap_percent", detail::host_swap_percent()}};
    if (const auto current = compat::mps_current_allocated_bytes(); current >= 0) {
      stats["mps_current_allocated_bytes"] = static_cast<double>(current);
    }
    if (const auto driver = compat::mps_driver_allocated_bytes(); driver >= 0) {
      stats["mps_driver_allocated_bytes"] = static_cast<double>(driver);
    }
    return stats;
  }

  /// Releases the MPS allocator's cached memory (torch.mps.empty_cache()); no-op where unsupported.
  static void empty_cache() { compat::mps_empty_cache(); }
  /// Bytes the MPS allocator holds for tensors; -1 where LibTorch does not tell.
  static std::int64_t allocated_bytes() { return compat::mps_current_allocated_bytes(); }
  /// Bytes the Metal driver holds for this process; -1 where LibTorch does not tell.
  static std::int64_t driver_allocated_bytes() { return compat::mps_driver_allocated_bytes(); }

  /// Nothing to release (Lightning does not clear the MPS cache on teardown).
  static void teardown() {}

 private:
  static bool compute_availability() {
    const char* disable = std::getenv("DISABLE_MPS");
    if (disable != nullptr && std::string_view(disable) == "1") return false;
    if (!machine::torch_mps_available()) return false;
    const std::string processor = machine::processor();
    return processor == "arm" || processor == "arm64";
  }
};

}  // namespace volt

/// \file
/// volt::CUDA: Lightning's CUDAAccelerator.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/accelerators/accelerator.hpp>
#include <volt/accelerators/device_parser.hpp>
#include <volt/accelerators/device_spec.hpp>
#include <volt/accelerators/machine.hpp>
#include <volt/core/compat.hpp>
#include <volt/core/log.hpp>
#include <volt/core/math_modes.hpp>

#include <torch/torch.h>

#include <cstdint>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace volt {

namespace detail {

/// Lightning's hint for a CUDA device with tensor cores (compute capability 8.0 or more) when float32 matmuls
/// run at "highest", word for word (in volt the setting is TrainerOptions::float32_matmul_precision); nullopt
/// when there is nothing to say.
VOLT_INLINE std::optional<std::string> tensor_core_hint(const compat::CudaDeviceInfo& device,
                                                        Float32MatmulPrecision precision);

/// Prints tensor_core_hint() for CUDA device `index` on rank zero, once per device and process (Lightning's
/// `_check_cuda_matmul_precision`, cached per device).
VOLT_INLINE void check_cuda_matmul_precision(int index);

}  // namespace detail

/// Accelerator policy: NVIDIA GPUs through LibTorch's CUDA backend.
struct CUDA {
  /// Lightning's accelerator name, used in messages and by the command line.
  static constexpr std::string_view name = "cuda";
  /// What visit_accelerator() and resolve_accelerator() report for this policy.
  static constexpr AcceleratorKind kind = AcceleratorKind::cuda;

  /// Whether at least one CUDA device is visible (not cached: CUDA_VISIBLE_DEVICES is read by LibTorch).
  static bool is_available() { return machine::cuda_device_count() > 0; }
  /// The number of visible CUDA devices.
  static int auto_device_count() { return machine::cuda_device_count(); }
  /// Lightning's available CUDA ids: 0 .. device_count-1.
  static std::vector<int> available_ids() { return detail::id_range(machine::cuda_device_count()); }

  /// Lightning's `_parse_gpu_ids(devices, include_cuda=True)`: nullopt for 0, "0", "[]" and
  /// volt::devices({}); -1 / "-1" = every visible device; n = 0..n-1; a list is checked, kept in order.
  /// Throws MisconfigurationError "GPUs requested but none are available.", "Device ID's (GPU) must be
  /// unique." or "You requested gpu: [...]\n But your machine only has: [...]"; std::invalid_argument
  /// for DeviceSpec{} ("auto", which the connector resolves first).
  static std::optional<std::vector<int>> parse_devices(const DeviceSpec& devices);

  /// torch::Device("cuda", id) for each id, in order ({3, 1} -> cuda:3, cuda:1). Ids are not checked against
  /// the machine; a negative id throws std::runtime_error "Device index must not be negative" (Python's
  /// torch.device("cuda", -2); reachable under torchrun, where Lightning skips the id checks).
  static std::vector<torch::Device> get_parallel_devices(const std::vector<int>& ids);

  /// Makes `device` the current CUDA device. Throws MisconfigurationError "Device should be GPU, got cpu
  /// instead" (Lightning's PL text: "GPU", no final period) for a non-CUDA device; Fabric:
  /// std::invalid_argument "Device should be CUDA, got cpu instead.". LibTorch's c10::Error if the device
  /// does not exist. Then prints Lightning's tensor-core hint (detail::tensor_core_hint) once per device.
  static void setup_device(torch::Device device, Frontend frontend = Frontend::trainer);

  /// The caching allocator's statistics for the device (Lightning: torch.cuda.memory_stats), under
  /// Lightning's key names ("allocated_bytes.all.current", "reserved_bytes.large_pool.peak", ...).
  /// Empty when volt was compiled without CUDA, and before the process's first CUDA allocation (as in
  /// Lightning). LibTorch's c10::Error for a device index that does not exist.
  static std::map<std::string, double> get_device_stats(torch::Device device);

  /// Returns cached, unused blocks of the caching allocator to the driver (torch.cuda.empty_cache()).
  static void empty_cache() { compat::cuda_empty_cache(); }
  /// Bytes currently allocated to tensors on the device (0 without CUDA or before the first allocation).
  static std::int64_t allocated_bytes(torch::Device device);

  /// Lightning's teardown: empties the allocator's cache.
  static void teardown() { empty_cache(); }

 private:
  // LibTorch's caching allocator is set up lazily, by the first CUDA allocation; asking it for statistics
  // before that throws "Invalid device argument <index>: did you call init?" (the index is printed as a
  // char, so what() may end early). A device that does not exist still throws.
  static bool allocator_initialized(torch::Device device);

  static int device_index(torch::Device device);
};

}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/accelerators/impl/cuda.ipp>
#endif

/// \file
/// Every difference between LibTorch versions that volt depends on, and every feature macro, in one place.
///
/// volt supports LibTorch 1.13 (Debian 12's package) through 2.11 (PyPI's torch wheel). Code elsewhere in
/// volt calls these functions and never tests TORCH_VERSION itself; messages that print the version use
/// compat::torch_version_string. The differences in kernels and optimizer internals are in the second part,
/// volt/core/compat_kernels.hpp, which this header includes at its end.
///
/// CUDA-only code (allocator statistics, the caching allocator's cache) is compiled when VOLT_WITH_CUDA is
/// defined: volt's CMake target defines it when the LibTorch found was built with CUDA. Users who vendor the
/// single header and link a CUDA LibTorch by hand define it themselves.
#pragma once

#include <torch/torch.h>
#include <torch/version.h>
#include <ATen/autocast_mode.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#if __has_include(<torch/mps.h>)
#include <torch/mps.h>
#define VOLT_DETAIL_HAS_TORCH_MPS_H 1
#endif
#if __has_include(<ATen/detail/MPSHooksInterface.h>)
#include <ATen/detail/MPSHooksInterface.h>
#define VOLT_DETAIL_HAS_MPS_HOOKS 1
#endif
#ifdef VOLT_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

/// LibTorch's version as one number: major * 10000 + minor * 100 + patch (1.13.0 -> 11300).
#define VOLT_TORCH_VERSION (TORCH_VERSION_MAJOR * 10000 + TORCH_VERSION_MINOR * 100 + TORCH_VERSION_PATCH)

// ---------------------------------------------------------------------------------------------------
// Feature macros: what this translation unit can use, decided from the LibTorch version, VOLT_WITH_CUDA and
// the headers found. Every such macro of volt is defined here (the VOLT_DETAIL_ ones are internal), so that
// each is defined before any header that tests it, whatever the order in which a program includes volt's
// headers. The headers that use them include this one first.
//
//   VOLT_DETAIL_HAS_TORCH_MPS_H   <torch/mps.h> exists (above)
//   VOLT_DETAIL_HAS_MPS_HOOKS     <ATen/detail/MPSHooksInterface.h> exists (above)
//   VOLT_DETAIL_HAS_CUDA_GRAPHS   1 with VOLT_WITH_CUDA and LibTorch 2.4+, else 0 (volt/trainer/loops/train_step_graph.hpp);
//                                 the CUDA graph, event, guard and stream headers are included here then
//   VOLT_DETAIL_HAS_C10D          LibTorch's c10d headers exist (volt/distributed/)
//   VOLT_DETAIL_HAS_GLOO          c10d and gloo's headers exist; LibTorch's USE_C10D_GLOO is defined with it,
//                                 which <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp> needs to declare anything
//   VOLT_DETAIL_HAS_NCCL          c10d, VOLT_WITH_CUDA and nccl.h; LibTorch's USE_C10D_NCCL is defined with it,
//                                 which <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp> needs
//   VOLT_DETAIL_HAS_CUDNN         VOLT_WITH_CUDA, cudnn.h and ATen's cuDNN handle header: volt::nn's fused
//                                 batch-norm path (volt/nn/detail/cudnn_batch_norm.hpp); cuDNN's functions are
//                                 looked up at run time in the libcudnn that LibTorch loaded, so nothing more links
//   VOLT_DETAIL_HAS_RUNTIME_KERNELS  VOLT_WITH_CUDA on Linux: volt::nn's kernels compiled at run time with NVRTC
//                                 (volt/nn/detail/runtime_kernel.hpp); libnvrtc and libcuda are opened at run time
//
// The c10d headers themselves are included by volt/distributed/process_group.hpp, after this header.

#if defined(VOLT_WITH_CUDA) && VOLT_TORCH_VERSION >= 20400
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#define VOLT_DETAIL_HAS_CUDA_GRAPHS 1
#else
#define VOLT_DETAIL_HAS_CUDA_GRAPHS 0
#endif

#if defined(VOLT_WITH_CUDA) && __has_include(<cudnn.h>) && __has_include(<ATen/cudnn/Handle.h>)
#define VOLT_DETAIL_HAS_CUDNN 1
#endif

#if defined(VOLT_WITH_CUDA) && defined(__linux__) && __has_include(<c10/cuda/CUDAStream.h>) && \
    __has_include(<cuda_runtime_api.h>) && __has_include(<dlfcn.h>)
#define VOLT_DETAIL_HAS_RUNTIME_KERNELS 1
#endif

#if __has_include(<torch/csrc/distributed/c10d/TCPStore.hpp>)
#define VOLT_DETAIL_HAS_C10D 1
#if __has_include(<gloo/config.h>)
#define VOLT_DETAIL_HAS_GLOO 1
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO
#endif
#endif
#if defined(VOLT_WITH_CUDA) && __has_include(<nccl.h>) && \
    __has_include(<torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>)
#define VOLT_DETAIL_HAS_NCCL 1
#ifndef USE_C10D_NCCL
#define USE_C10D_NCCL
#endif
#endif
#endif

/// The LibTorch version differences volt depends on, behind one set of functions (1.13 through 2.11).
namespace volt::compat {

/// VOLT_TORCH_VERSION as a constant, for code that prefers `if constexpr` to the preprocessor.
inline constexpr int torch_version = VOLT_TORCH_VERSION;

/// LibTorch's version as text (TORCH_VERSION: "1.13.0", "2.11.0"), for messages.
inline constexpr const char* torch_version_string = TORCH_VERSION;

/// True where autocast is switched per device type (LibTorch 2.4 and later).
inline constexpr bool has_device_type_autocast_api = VOLT_TORCH_VERSION >= 20400;

// ---------------------------------------------------------------------------------------------------
// Autocast switches. LibTorch 1.13 has one switch and one dtype per backend family (gpu = CUDA, cpu);
// LibTorch 2.4+ takes the device type. MPS autocast exists only in the newer API.

/// Whether this LibTorch can autocast on `device_type` at all.
inline bool autocast_available(c10::DeviceType device_type) {
#if VOLT_TORCH_VERSION >= 20400
  return at::autocast::is_autocast_available(device_type);
#else
  return device_type == c10::DeviceType::CUDA || device_type == c10::DeviceType::CPU;
#endif
}

/// Whether autocast to `dtype` works on `device_type`. LibTorch 1.13's CPU autocast takes bf16 only
/// ("AutocastCPU only support Bfloat16"); MPS autocast needs a LibTorch with MPS autocast support.
inline bool autocast_dtype_supported(c10::DeviceType device_type, c10::ScalarType dtype) {
  if (!autocast_available(device_type)) return false;
#if VOLT_TORCH_VERSION < 20000
  if (device_type == c10::DeviceType::CPU) return dtype == c10::ScalarType::BFloat16;
#endif
  return dtype == c10::ScalarType::Half || dtype == c10::ScalarType::BFloat16;
}

/// Whether autocast is on for `device_type` in this thread (LibTorch 1.13: false for types other than CPU
/// and CUDA).
inline bool autocast_enabled(c10::DeviceType device_type) {
#if VOLT_TORCH_VERSION >= 20400
  return at::autocast::is_autocast_enabled(device_type);
#else
  if (device_type == c10::DeviceType::CPU) return at::autocast::is_cpu_enabled();
  if (device_type == c10::DeviceType::CUDA) return at::autocast::is_enabled();
  return false;
#endif
}

/// Switches autocast for `device_type` in this thread. On LibTorch before 2.4, a type other than CPU or CUDA
/// throws c10::Error ("volt: this LibTorch (...) has no autocast for device type ...").
inline void set_autocast_enabled(c10::DeviceType device_type, bool enabled) {
#if VOLT_TORCH_VERSION >= 20400
  at::autocast::set_autocast_enabled(device_type, enabled);
#else
  if (device_type == c10::DeviceType::CPU) {
    at::autocast::set_cpu_enabled(enabled);
  } else if (device_type == c10::DeviceType::CUDA) {
    at::autocast::set_enabled(enabled);
  } else {
    TORCH_CHECK(false, "volt: this LibTorch (", torch_version_string, ") has no autocast for device type ",
                c10::DeviceTypeName(device_type));
  }
#endif
}

/// The dtype autocast casts to on `device_type` in this thread (LibTorch 1.13: the CPU dtype for CPU, the
/// GPU dtype for every other type).
inline c10::ScalarType autocast_dtype(c10::DeviceType device_type) {
#if VOLT_TORCH_VERSION >= 20400
  return at::autocast::get_autocast_dtype(device_type);
#else
  return device_type == c10::DeviceType::CPU ? at::autocast::get_autocast_cpu_dtype()
                                             : at::autocast::get_autocast_gpu_dtype();
#endif
}

/// Sets the autocast dtype of `device_type` in this thread (LibTorch 1.13: the CPU dtype for CPU, the GPU
/// dtype for every other type).
inline void set_autocast_dtype(c10::DeviceType device_type, c10::ScalarType dtype) {
#if VOLT_TORCH_VERSION >= 20400
  at::autocast::set_autocast_dtype(device_type, dtype);
#else
  if (device_type == c10::DeviceType::CPU) {
    at::autocast::set_autocast_cpu_dtype(dtype);
  } else {
    at::autocast::set_autocast_gpu_dtype(dtype);
  }
#endif
}

/// Whether autocast caches the casted weights (LibTorch's thread-local switch).
inline bool autocast_cache_enabled() { return at::autocast::is_autocast_cache_enabled(); }
/// Switches autocast's weight cache for this thread.
inline void set_autocast_cache_enabled(bool enabled) { at::autocast::set_autocast_cache_enabled(enabled); }
/// Enters one autocast region of this thread and returns the new depth (as PyTorch's autocast.__enter__).
inline int autocast_increment_nesting() { return at::autocast::increment_nesting(); }
/// Leaves one autocast region of this thread and returns the new depth; at 0 the caller clears the cache.
inline int autocast_decrement_nesting() { return at::autocast::decrement_nesting(); }
/// Drops autocast's cached casts of this thread.
inline void autocast_clear_cache() { at::autocast::clear_cache(); }

// ---------------------------------------------------------------------------------------------------
// Device probes. These read the real machine; volt's accelerators read them through the overridable
// probes in volt/accelerators/machine.hpp, never directly.

/// LibTorch's own answer to "is MPS usable": built with MPS and running on a Mac that supports it.
inline bool torch_mps_available() {
#ifdef VOLT_DETAIL_HAS_TORCH_MPS_H
  return torch::mps::is_available();
#else
  return at::hasMPS();
#endif
}

/// Number of CUDA devices visible to this process (0 for a LibTorch without CUDA).
inline int torch_cuda_device_count() { return static_cast<int>(torch::cuda::device_count()); }

/// A CUDA device's name and compute capability.
struct CudaDeviceInfo {
  std::string name;  ///< e.g. "NVIDIA H200"
  int major = 0;     ///< compute capability, major (8 and up: tensor cores for TF32)
  int minor = 0;     ///< compute capability, minor
};
/// The name and compute capability of CUDA device `device_index`; nullopt without CUDA or without that device.
inline std::optional<CudaDeviceInfo> cuda_device_info([[maybe_unused]] int device_index) {
#ifdef VOLT_WITH_CUDA
  if (device_index < 0 || device_index >= static_cast<int>(c10::cuda::device_count())) return std::nullopt;
  const auto* properties = at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(device_index));
  return CudaDeviceInfo{properties->name, properties->major, properties->minor};
#else
  return std::nullopt;
#endif
}

/// Whether this LibTorch was built with CUDA and volt compiled its CUDA code paths.
inline constexpr bool built_with_cuda =
#ifdef VOLT_WITH_CUDA
    true;
#else
    false;
#endif

// ---------------------------------------------------------------------------------------------------
// Memory of the device allocators.

/// The CUDA caching allocator's statistics for one device, under Lightning's key names
/// ("allocated_bytes.all.current", "reserved_bytes.all.peak", ...). Empty without CUDA.
inline std::map<std::string, double> cuda_memory_stats([[maybe_unused]] int device_index) {
  std::map<std::string, double> out;
#ifdef VOLT_WITH_CUDA
  // The allocator throws "Invalid device argument" for a device that is not there (e.g. no GPU at all).
  if (device_index < 0 || device_index >= static_cast<int>(c10::cuda::device_count())) return out;
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device_index));
  const char* pools[] = {"all", "small_pool", "large_pool"};
  auto add_array = [&](const std::string& name, const auto& array) {
    for (std::size_t pool = 0; pool < 3; ++pool) {
      const std::string prefix = name + "." + pools[pool] + ".";
      out[prefix + "current"] = static_cast<double>(array[pool].current);
      out[prefix + "peak"] = static_cast<double>(array[pool].peak);
      out[prefix + "allocated"] = static_cast<double>(array[pool].allocated);
      out[prefix + "freed"] = static_cast<double>(array[pool].freed);
    }
  };
  add_array("allocation", stats.allocation);
  add_array("segment", stats.segment);
  add_array("active", stats.active);
  add_array("inactive_split", stats.inactive_split);
  add_array("allocated_bytes", stats.allocated_bytes);
  add_array("reserved_bytes", stats.reserved_bytes);
  add_array("active_bytes", stats.active_bytes);
  add_array("inactive_split_bytes", stats.inactive_split_bytes);
  add_array("requested_bytes", stats.requested_bytes);
  out["num_alloc_retries"] = static_cast<double>(stats.num_alloc_retries);
  out["num_ooms"] = static_cast<double>(stats.num_ooms);
  out["max_split_size"] = static_cast<double>(stats.max_split_size);
#endif
  return out;
}

/// Bytes currently allocated by the CUDA caching allocator on one device (0 without CUDA or without that device).
inline std::int64_t cuda_allocated_bytes([[maybe_unused]] int device_index) {
#ifdef VOLT_WITH_CUDA
  if (device_index < 0 || device_index >= static_cast<int>(c10::cuda::device_count())) return 0;
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device_index));
  return stats.allocated_bytes[0].current;
#else
  return 0;
#endif
}

/// Returns the CUDA caching allocator's unused cached blocks to the driver (no-op without CUDA).
inline void cuda_empty_cache() {
#ifdef VOLT_WITH_CUDA
  c10::cuda::CUDACachingAllocator::emptyCache();
#endif
}

/// Whether this LibTorch exposes the MPS allocator's counters (LibTorch 2.1 and later).
inline constexpr bool has_mps_allocator_stats =
#ifdef VOLT_DETAIL_HAS_MPS_HOOKS
    VOLT_TORCH_VERSION >= 20100;
#else
    false;
#endif

/// Bytes the MPS allocator holds for tensors (current) and from the Metal driver (driver); -1 if unknown.
inline std::int64_t mps_current_allocated_bytes() {
#if defined(VOLT_DETAIL_HAS_MPS_HOOKS) && VOLT_TORCH_VERSION >= 20100
  if (torch_mps_available()) return static_cast<std::int64_t>(at::detail::getMPSHooks().getCurrentAllocatedMemory());
#endif
  return -1;
}
/// See mps_current_allocated_bytes(): bytes the MPS allocator got from the Metal driver; -1 if unknown.
inline std::int64_t mps_driver_allocated_bytes() {
#if defined(VOLT_DETAIL_HAS_MPS_HOOKS) && VOLT_TORCH_VERSION >= 20100
  if (torch_mps_available()) return static_cast<std::int64_t>(at::detail::getMPSHooks().getDriverAllocatedMemory());
#endif
  return -1;
}
/// Returns the MPS allocator's unused cached memory to the system; does nothing where MPS is absent.
inline void mps_empty_cache() {
#if defined(VOLT_DETAIL_HAS_MPS_HOOKS) && VOLT_TORCH_VERSION >= 20100
  if (torch_mps_available()) at::detail::getMPSHooks().emptyCache();
#endif
}

// ---------------------------------------------------------------------------------------------------
// Learning-rate schedulers: LibTorch 2.x adds ReduceLROnPlateauScheduler; both have LRScheduler.

/// True where LibTorch has ReduceLROnPlateauScheduler (LibTorch 2.0 and later).
inline constexpr bool has_reduce_lr_on_plateau = VOLT_TORCH_VERSION >= 20000;

// ---------------------------------------------------------------------------------------------------
// Tensor dtypes: the float8 types came in LibTorch 2.1 (e5m2, e4m3fn) and 2.2 (the fnuz pair), the unsigned
// 16/32/64-bit integers in 2.3, float8_e8m0fnu in 2.7, float4_e2m1fn_x2 in 2.8.

/// The ScalarType named `name` (c10's spelling: "Float", "BFloat16", "Float8_e4m3fn", "UInt16", ...), or
/// nullopt where this LibTorch has no such type. Covers the types file formats exchange (volt/serialization).
inline std::optional<c10::ScalarType> scalar_type_named(std::string_view name) {
  using S = c10::ScalarType;
  static const std::pair<std::string_view, S> known[] = {
      {"Bool", S::Bool},     {"Byte", S::Byte},         {"Char", S::Char},     {"Short", S::Short},
      {"Int", S::Int},       {"Long", S::Long},         {"Half", S::Half},     {"BFloat16", S::BFloat16},
      {"Float", S::Float},   {"Double", S::Double},     {"ComplexFloat", S::ComplexFloat},
#if VOLT_TORCH_VERSION >= 20100
      {"Float8_e5m2", S::Float8_e5m2},                  {"Float8_e4m3fn", S::Float8_e4m3fn},
#endif
#if VOLT_TORCH_VERSION >= 20200
      {"Float8_e5m2fnuz", S::Float8_e5m2fnuz},          {"Float8_e4m3fnuz", S::Float8_e4m3fnuz},
#endif
#if VOLT_TORCH_VERSION >= 20300
      {"UInt16", S::UInt16}, {"UInt32", S::UInt32},     {"UInt64", S::UInt64},
#endif
#if VOLT_TORCH_VERSION >= 20700
      {"Float8_e8m0fnu", S::Float8_e8m0fnu},
#endif
#if VOLT_TORCH_VERSION >= 20800
      {"Float4_e2m1fn_x2", S::Float4_e2m1fn_x2},
#endif
  };
  for (const auto& [known_name, type] : known) {
    if (known_name == name) return type;
  }
  return std::nullopt;
}

/// The start of a LibTorch profiler event (torch::autograd::profiler::KinetoEvent) in microseconds: 1.13 gives
/// startUs(), 2.1 and later startNs().
template <class Event>
double profiler_event_start_us(const Event& event) {
  if constexpr (requires { event.startNs(); }) {
    return static_cast<double>(event.startNs()) / 1000.0;
  } else {
    return static_cast<double>(event.startUs());
  }
}

/// The duration of a LibTorch profiler event in microseconds (durationUs() in 1.13, durationNs() later).
template <class Event>
double profiler_event_duration_us(const Event& event) {
  if constexpr (requires { event.durationNs(); }) {
    return static_cast<double>(event.durationNs()) / 1000.0;
  } else {
    return static_cast<double>(event.durationUs());
  }
}

}  // namespace volt::compat

// The kernels' differences (grad scaler, optimizers, multi-tensor ops) are in compat_kernels.hpp, included
// here so that this header gives every difference; it includes this one first.
#include <volt/core/compat_kernels.hpp>

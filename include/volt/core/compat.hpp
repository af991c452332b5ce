/// \file
/// Every difference between LibTorch versions that volt depends on, in one place.
///
/// volt supports LibTorch 1.13 (Debian 12's package) through 2.11 (PyPI's torch wheel). Code elsewhere in
/// volt calls these functions and never tests TORCH_VERSION itself.
///
/// CUDA-only code (allocator statistics, the caching allocator's cache) is compiled when VOLT_WITH_CUDA is
/// defined: volt's CMake target defines it when the LibTorch found was built with CUDA. Users who vendor the
/// single header and link a CUDA LibTorch by hand define it themselves.
#pragma once

#include <torch/torch.h>
#include <torch/version.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <sstream>
#include <string>
#include <type_traits>
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
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

/// LibTorch's version as one number: major * 10000 + minor * 100 + patch (1.13.0 -> 11300).
#define VOLT_TORCH_VERSION (TORCH_VERSION_MAJOR * 10000 + TORCH_VERSION_MINOR * 100 + TORCH_VERSION_PATCH)

/// The LibTorch version differences volt depends on, behind one set of functions (1.13 through 2.11).
namespace volt::compat {

/// VOLT_TORCH_VERSION as a constant, for code that prefers `if constexpr` to the preprocessor.
inline constexpr int torch_version = VOLT_TORCH_VERSION;

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
    TORCH_CHECK(false, "volt: this LibTorch (", TORCH_VERSION, ") has no autocast for device type ",
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
// Grad scaler kernels (volt/precision/grad_scaler.hpp).
//
// `at::_amp_foreach_non_finite_check_and_unscale_` and `at::_amp_update_scale_` are declared in every
// version, but a call throws where no kernel is registered for the tensors' backend: CUDA always has
// them; CPU got them in LibTorch 2.3 (absent in 1.13, present in 2.11); MPS only in macOS builds of recent
// versions. Asking the dispatcher answers for the LibTorch actually loaded, whatever its version.

/// Whether the loaded LibTorch's dispatcher has a kernel of operator `name` (overload `overload`, "" for the
/// default one) for `device_type` (CPU, CUDA or MPS; false for any other).
inline bool has_kernel(const char* name, const char* overload, c10::DeviceType device_type) {
  c10::DispatchKey key{};
  switch (device_type) {
    case c10::DeviceType::CPU: key = c10::DispatchKey::CPU; break;
    case c10::DeviceType::CUDA: key = c10::DispatchKey::CUDA; break;
    case c10::DeviceType::MPS: key = c10::DispatchKey::MPS; break;
    default: return false;
  }
  const auto handle = c10::Dispatcher::singleton().findSchema({name, overload});
  return handle && handle->hasKernelForDispatchKey(key);
}

/// Whether both fused grad-scaler kernels are registered for `device_type` in the loaded LibTorch.
inline bool amp_scaler_kernels_available(c10::DeviceType device_type) {
  return has_kernel("aten::_amp_foreach_non_finite_check_and_unscale_", "", device_type) &&
         has_kernel("aten::_amp_update_scale_", "", device_type);
}

// ---------------------------------------------------------------------------------------------------
// Optimizer internals (volt/optim/).
//
// Optimizer::state() is keyed by the parameter's TensorImpl: LibTorch 1.13 by its address printed as a
// string (c10::guts::to_string), 2.x by the address itself. `at::_fused_adam_` and `at::_fused_adamw_`
// (one kernel for a whole list of parameters) are called from LibTorch 2.1 on (1.13 has only a CUDA
// `_fused_adam_`, and no `_fused_adamw_`); which device types have kernels is asked of the dispatcher
// (CUDA in 2.x, CPU from 2.4).

/// The key type of torch::optim::Optimizer::state() in this LibTorch.
using OptimizerStateKey =
    std::remove_cvref_t<decltype(std::declval<torch::optim::Optimizer&>().state())>::key_type;

/// The key under which LibTorch's optimizers keep the state of `parameter` (a template only so that the
/// branch of the other versions is discarded).
template <class Key = OptimizerStateKey>
Key optimizer_state_key(const at::Tensor& parameter) {
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream text;  // what LibTorch 1.13's c10::guts::to_string(TensorImpl*) writes
    text << static_cast<const void*>(parameter.unsafeGetTensorImpl());
    return text.str();
  } else {
    return static_cast<Key>(parameter.unsafeGetTensorImpl());
  }
}

/// Whether volt calls LibTorch's fused Adam/AdamW kernels in this LibTorch version at all.
inline constexpr bool has_fused_adam = VOLT_TORCH_VERSION >= 20100;

/// Whether the loaded LibTorch has a fused Adam (`decoupled_weight_decay` false) or AdamW kernel for
/// `device_type`.
inline bool fused_adam_available(c10::DeviceType device_type, bool decoupled_weight_decay) {
  if constexpr (!has_fused_adam) {
    return false;
  } else {
    if (device_type != c10::DeviceType::CPU && device_type != c10::DeviceType::CUDA) return false;
    return has_kernel(decoupled_weight_decay ? "aten::_fused_adamw_" : "aten::_fused_adam_", "", device_type);
  }
}

/// `at::_fused_adamw_` when `decoupled_weight_decay`, else `at::_fused_adam_`, with `maximize` false and
/// no grad scale or found-inf tensor. `state_steps` are float32 tensors on the parameters' device holding
/// the step number each update is the n-th of (already counted). Throws c10::Error where absent.
inline void fused_adam_(bool decoupled_weight_decay, at::TensorList params, at::TensorList grads,
                        at::TensorList exp_avgs, at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs,
                        at::TensorList state_steps, double lr, double beta1, double beta2, double weight_decay,
                        double eps, bool amsgrad) {
#if VOLT_TORCH_VERSION >= 20100
  if (decoupled_weight_decay) {
    at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, beta1, beta2,
                      weight_decay, eps, amsgrad, /*maximize=*/false);
  } else {
    at::_fused_adam_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, beta1, beta2,
                     weight_decay, eps, amsgrad, /*maximize=*/false);
  }
#else
  (void)decoupled_weight_decay, (void)params, (void)grads, (void)exp_avgs, (void)exp_avg_sqs,
      (void)max_exp_avg_sqs, (void)state_steps, (void)lr, (void)beta1, (void)beta2, (void)weight_decay,
      (void)eps, (void)amsgrad;
  TORCH_CHECK(false, "volt: fused Adam kernels are not used with this LibTorch (", TORCH_VERSION,
              "); use the multi-tensor implementation");
#endif
}

// ---------------------------------------------------------------------------------------------------
// Multi-tensor copies.

/// `destinations[i].copy_(sources[i])` for every i (same dtypes and sizes): one multi-tensor kernel per
/// device where LibTorch has `at::_foreach_copy_` (2.4 on), else one copy per tensor.
inline void foreach_copy_(at::TensorList destinations, at::TensorList sources) {
  TORCH_CHECK(destinations.size() == sources.size(), "volt: foreach_copy_ got ", destinations.size(),
              " destinations and ", sources.size(), " sources");
  if (destinations.empty()) return;
#if VOLT_TORCH_VERSION >= 20400
  at::_foreach_copy_(destinations, sources);
#else
  for (std::size_t i = 0; i < destinations.size(); ++i) destinations[i].copy_(sources[i]);
#endif
}

}  // namespace volt::compat

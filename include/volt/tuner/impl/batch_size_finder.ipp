/// \file
/// Definitions of the functions declared in volt/tuner/batch_size_finder.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt {

VOLT_INLINE bool is_oom_error(const std::exception& error) {
  if (dynamic_cast<const c10::OutOfMemoryError*>(&error) != nullptr) return true;
  if (dynamic_cast<const std::bad_alloc*>(&error) != nullptr) return true;
  const std::string_view message = error.what();
  auto has = [&](std::string_view needle) { return message.find(needle) != std::string_view::npos; };
  return (has("CUDA") && has("out of memory")) || has("MPS backend out of memory") ||
         has("DefaultCPUAllocator: can't allocate memory") || has("CUBLAS_STATUS_ALLOC_FAILED") ||
         has("cuDNN error: CUDNN_STATUS_NOT_SUPPORTED.") || has("CUDNN_STATUS_ALLOC_FAILED");
}

VOLT_INLINE void release_cached_device_memory() {
  compat::cuda_empty_cache();
  compat::mps_empty_cache();
}

}  // namespace volt

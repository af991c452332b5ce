/// \file
/// Definitions of the functions declared in volt/accelerators/cuda.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE std::optional<std::string> tensor_core_hint(const compat::CudaDeviceInfo& device,
                                                        Float32MatmulPrecision precision) {
  if (device.major < 8 || precision.level() != Float32MatmulPrecision::Level::highest) return std::nullopt;
  return "You are using a CUDA device ('" + device.name +
         "') that has Tensor Cores. To properly utilize them, you should set "
         "`torch.set_float32_matmul_precision('medium' | 'high')` which will trade-off precision for performance. "
         "For more details, read https://pytorch.org/docs/stable/generated/torch.set_float32_matmul_precision.html"
         "#torch.set_float32_matmul_precision";
}

VOLT_INLINE void check_cuda_matmul_precision(int index) {
  const auto device = compat::cuda_device_info(index);
  if (!device) return;
  const auto hint = tensor_core_hint(*device, current_float32_matmul_precision());
  if (!hint) return;
  static std::mutex mutex;
  static std::set<int> hinted;
  {
    std::lock_guard lock(mutex);
    if (!hinted.insert(index).second) return;
  }
  log::info_rank_zero(*hint);
}
}  // namespace volt::detail

namespace volt {

VOLT_INLINE auto CUDA::parse_devices(const DeviceSpec& devices) -> std::optional<std::vector<int>> {
  return detail::parse_gpu_ids(devices, available_ids());
}

VOLT_INLINE auto CUDA::get_parallel_devices(const std::vector<int>& ids) -> std::vector<torch::Device> {
  std::vector<torch::Device> devices;
  devices.reserve(ids.size());
  for (int id : ids) {
    if (id < 0) throw std::runtime_error("Device index must not be negative");
    devices.emplace_back(torch::kCUDA, static_cast<c10::DeviceIndex>(id));
  }
  return devices;
}

VOLT_INLINE void CUDA::setup_device(torch::Device device, Frontend frontend) {
  if (frontend == Frontend::fabric) {
    detail::check_device_type(device, torch::kCUDA, "CUDA", true, frontend);
  } else {
    detail::check_device_type(device, torch::kCUDA, "GPU", false, frontend);
  }
#ifdef VOLT_WITH_CUDA
  if (device.has_index()) c10::cuda::set_device(device.index());
#endif
  detail::check_cuda_matmul_precision(device_index(device));
}

VOLT_INLINE auto CUDA::get_device_stats(torch::Device device) -> std::map<std::string, double> {
  if (!allocator_initialized(device)) return {};
  return compat::cuda_memory_stats(device_index(device));
}

VOLT_INLINE std::int64_t CUDA::allocated_bytes(torch::Device device) {
  if (!allocator_initialized(device)) return 0;
  return compat::cuda_allocated_bytes(device_index(device));
}

VOLT_INLINE bool CUDA::allocator_initialized(torch::Device device) {
  const int index = device_index(device);
  if (index < 0 || index >= compat::torch_cuda_device_count()) return true;
  try {
    (void)compat::cuda_allocated_bytes(index);
    return true;
  } catch (const std::exception& error) {
    if (std::string_view(error.what()).starts_with("Invalid device argument")) return false;
    throw;
  }
}

VOLT_INLINE int CUDA::device_index(torch::Device device) {
  if (device.has_index()) return device.index();
#ifdef VOLT_WITH_CUDA
  return c10::cuda::current_device();
#else
  return 0;
#endif
}

}  // namespace volt

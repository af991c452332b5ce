/// \file
/// Definitions of the functions declared in volt/accelerators/mps.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt {

VOLT_INLINE bool MPS::is_available() {
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

VOLT_INLINE void MPS::clear_availability_cache() {
  auto& state = machine::detail::probe_state();
  std::lock_guard lock(state.mutex);
  state.mps_available_cache = -1;
}

VOLT_INLINE auto MPS::parse_devices(const DeviceSpec& devices) -> std::optional<std::vector<int>> {
  return detail::parse_gpu_ids(devices, available_ids());
}

VOLT_INLINE auto MPS::get_parallel_devices(const std::vector<int>& ids) -> std::vector<torch::Device> {
  std::vector<torch::Device> devices;
  devices.reserve(ids.size());
  for (std::size_t position = 0; position < ids.size(); ++position) {
    devices.emplace_back(torch::kMPS, static_cast<c10::DeviceIndex>(position));
  }
  return devices;
}

VOLT_INLINE void MPS::setup_device(torch::Device device, Frontend frontend) {
  detail::check_device_type(device, torch::kMPS, "MPS", true, frontend);
}

VOLT_INLINE auto MPS::get_device_stats(torch::Device /*device*/) -> std::map<std::string, double> {
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

VOLT_INLINE bool MPS::compute_availability() {
  const char* disable = std::getenv("DISABLE_MPS");
  if (disable != nullptr && std::string_view(disable) == "1") return false;
  if (!machine::torch_mps_available()) return false;
  const std::string processor = machine::processor();
  return processor == "arm" || processor == "arm64";
}

}  // namespace volt

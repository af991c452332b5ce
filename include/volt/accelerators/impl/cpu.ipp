/// \file
/// Definitions of the functions declared in volt/accelerators/cpu.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt {

VOLT_INLINE auto CPU::parse_devices(const DeviceSpec& devices) -> std::optional<std::vector<int>> {
  return detail::id_range(detail::parse_cpu_cores(devices));
}

VOLT_INLINE auto CPU::get_parallel_devices(const std::vector<int>& ids) -> std::vector<torch::Device> {
  return std::vector<torch::Device>(ids.size(), torch::Device(torch::kCPU));
}

VOLT_INLINE void CPU::setup_device(torch::Device device, Frontend frontend) {
  detail::check_device_type(device, torch::kCPU, "CPU", true, frontend);
}

VOLT_INLINE auto CPU::get_device_stats(torch::Device /*device*/) -> std::map<std::string, double> {
  return {{"cpu_vm_percent", detail::host_memory_percent()},
          {"cpu_percent", detail::host_cpu_percent()},
          {"cpu_swap_percent", detail::host_swap_percent()}};
}

}  // namespace volt

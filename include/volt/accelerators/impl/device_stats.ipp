/// \file
/// Definitions of the functions declared in volt/accelerators/device_stats.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE double usage_percent(double used, double total) {
  if (total <= 0) return 0.0;
  return std::round(used / total * 100.0 * 10.0) / 10.0;
}

VOLT_INLINE CpuTimes read_cpu_times() {
#if defined(__linux__)
  std::ifstream file("/proc/stat");
  std::string label;
  if (!(file >> label) || label != "cpu") throw std::runtime_error("volt: cannot read /proc/stat for the CPU load");
  double fields[10] = {};
  for (double& field : fields) {
    if (!(file >> field)) break;
  }
  // user nice system idle iowait irq softirq steal guest guest_nice
  const double total = fields[0] + fields[1] + fields[2] + fields[3] + fields[4] + fields[5] + fields[6] + fields[7];
  return {total - fields[3] - fields[4], total};
#elif defined(__APPLE__)
  host_cpu_load_info_data_t load{};
  mach_msg_type_number_t count = HOST_CPU_LOAD_INFO_COUNT;
  if (host_statistics(mach_host_self(), HOST_CPU_LOAD_INFO, reinterpret_cast<host_info_t>(&load), &count) !=
      KERN_SUCCESS) {
    throw std::runtime_error("volt: host_statistics(HOST_CPU_LOAD_INFO) failed");
  }
  const double user = load.cpu_ticks[CPU_STATE_USER];
  const double system = load.cpu_ticks[CPU_STATE_SYSTEM];
  const double idle = load.cpu_ticks[CPU_STATE_IDLE];
  const double nice = load.cpu_ticks[CPU_STATE_NICE];
  return {user + system + nice, user + system + idle + nice};
#else
  throw std::runtime_error("volt: CPU statistics are implemented for Linux and macOS only");
#endif
}

VOLT_INLINE double host_memory_percent() {
#if defined(__linux__)
  const MemInfo info = read_meminfo();
  return usage_percent(info.mem_total - info.mem_available, info.mem_total);
#elif defined(__APPLE__)
  std::uint64_t total = 0;
  std::size_t size = sizeof(total);
  if (sysctlbyname("hw.memsize", &total, &size, nullptr, 0) != 0) throw std::runtime_error("volt: sysctl hw.memsize failed");
  vm_statistics64_data_t vm{};
  mach_msg_type_number_t count = HOST_VM_INFO64_COUNT;
  if (host_statistics64(mach_host_self(), HOST_VM_INFO64, reinterpret_cast<host_info64_t>(&vm), &count) != KERN_SUCCESS) {
    throw std::runtime_error("volt: host_statistics64(HOST_VM_INFO64) failed");
  }
  vm_size_t page_size = 0;
  host_page_size(mach_host_self(), &page_size);
  // psutil on macOS: available = inactive + free pages.
  const double available = (static_cast<double>(vm.inactive_count) + static_cast<double>(vm.free_count)) *
                           static_cast<double>(page_size);
  return usage_percent(static_cast<double>(total) - available, static_cast<double>(total));
#else
  throw std::runtime_error("volt: memory statistics are implemented for Linux and macOS only");
#endif
}

VOLT_INLINE double host_swap_percent() {
#if defined(__linux__)
  const MemInfo info = read_meminfo();
  return usage_percent(info.swap_total - info.swap_free, info.swap_total);
#elif defined(__APPLE__)
  xsw_usage swap{};
  std::size_t size = sizeof(swap);
  if (sysctlbyname("vm.swapusage", &swap, &size, nullptr, 0) != 0) throw std::runtime_error("volt: sysctl vm.swapusage failed");
  return usage_percent(static_cast<double>(swap.xsu_used), static_cast<double>(swap.xsu_total));
#else
  throw std::runtime_error("volt: swap statistics are implemented for Linux and macOS only");
#endif
}

VOLT_INLINE double host_cpu_percent() {
  static std::mutex mutex;
  static CpuTimes previous{};
  const CpuTimes now = read_cpu_times();
  std::lock_guard lock(mutex);
  const double total_delta = now.total - previous.total;
  const double busy_delta = now.busy - previous.busy;
  previous = now;
  if (total_delta <= 0) return 0.0;
  const double percent = std::round(busy_delta / total_delta * 100.0 * 10.0) / 10.0;
  return percent < 0 ? 0.0 : percent > 100 ? 100.0 : percent;
}

}  // namespace volt::detail

/// \file
/// Host-wide memory and CPU figures, as psutil computes them for Lightning's CPU and MPS device stats
/// (virtual_memory().percent, cpu_percent(interval=None), swap_memory().percent). Read from /proc on
/// Linux and from mach/sysctl on macOS; other systems throw.
#pragma once

#include <volt/core/linkage.hpp>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>

#ifdef __APPLE__
#include <mach/mach.h>
#include <mach/mach_host.h>
#include <sys/sysctl.h>
#include <sys/types.h>
#endif

namespace volt::detail {

/// psutil's usage_percent(used, total, round_=1): 0 when total is 0.
VOLT_INLINE double usage_percent(double used, double total);

struct CpuTimes {
  double busy = 0;
  double total = 0;
};

#if defined(__linux__)
/// The values (in kB) of /proc/meminfo's MemTotal, MemAvailable, SwapTotal and SwapFree.
struct MemInfo {
  double mem_total = 0, mem_available = 0, swap_total = 0, swap_free = 0;
};
inline MemInfo read_meminfo() {
  std::ifstream file("/proc/meminfo");
  if (!file) throw std::runtime_error("volt: cannot read /proc/meminfo for the host's memory statistics");
  MemInfo info;
  std::string key;
  double value = 0;
  std::string unit;
  std::string line;
  while (std::getline(file, line)) {
    std::istringstream fields(line);
    if (!(fields >> key >> value)) continue;
    if (key == "MemTotal:") info.mem_total = value;
    else if (key == "MemAvailable:") info.mem_available = value;
    else if (key == "SwapTotal:") info.swap_total = value;
    else if (key == "SwapFree:") info.swap_free = value;
  }
  return info;
}
#endif

/// Total and busy CPU time since boot, summed over all CPUs (psutil: busy excludes idle and iowait;
/// total excludes guest time, which the kernel already counts in user and nice).
VOLT_INLINE CpuTimes read_cpu_times();

/// psutil.virtual_memory().percent: (total - available) / total, rounded to one decimal.
VOLT_INLINE double host_memory_percent();

/// psutil.swap_memory().percent: used / total swap, rounded to one decimal (0 without swap).
VOLT_INLINE double host_swap_percent();

/// psutil.cpu_percent(interval=None): the busy share of CPU time since the previous call in this process,
/// rounded to one decimal. The first call measures since boot (psutil measures since its import).
VOLT_INLINE double host_cpu_percent();

}  // namespace volt::detail

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/accelerators/impl/device_stats.ipp>
#endif

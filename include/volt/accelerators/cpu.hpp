/// \file
/// volt::CPU: Lightning's CPUAccelerator.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/accelerators/accelerator.hpp>
#include <volt/accelerators/device_parser.hpp>
#include <volt/accelerators/device_spec.hpp>
#include <volt/accelerators/device_stats.hpp>

#include <torch/torch.h>

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace volt {

/// Accelerator policy: train on the CPU, in one process per requested "device".
struct CPU {
  /// Lightning's accelerator name, used in messages and by the command line.
  static constexpr std::string_view name = "cpu";
  /// What visit_accelerator() and resolve_accelerator() report for this policy.
  static constexpr AcceleratorKind kind = AcceleratorKind::cpu;

  /// Always true.
  static bool is_available() { return true; }
  /// 1, as in Lightning ("auto" devices on CPU is one process).
  static int auto_device_count() { return 1; }

  /// Lightning's `_parse_cpu_cores`: {0, 1, ..., n-1} for an int n > 0 or a string of digits such as "3".
  /// Throws std::invalid_argument (Python's TypeError) "`devices` selected with `CPUAccelerator` should be
  /// an int > 0." for anything else: 0, "0", -1, "-1", "+2", lists, DeviceSpec{} ("auto").
  static std::optional<std::vector<int>> parse_devices(const DeviceSpec& devices);

  /// One torch::Device("cpu") per id.
  static std::vector<torch::Device> get_parallel_devices(const std::vector<int>& ids);

  /// Throws MisconfigurationError "Device should be CPU, got cuda:0 instead." for a non-CPU device
  /// (Fabric: std::invalid_argument with the same text).
  static void setup_device(torch::Device device, Frontend frontend = Frontend::trainer);

  /// Host-wide figures, as Lightning reads them from psutil: "cpu_vm_percent" (memory in use),
  /// "cpu_percent" (busy CPU time since the previous call), "cpu_swap_percent". Throws
  /// std::runtime_error on systems other than Linux and macOS.
  static std::map<std::string, double> get_device_stats(torch::Device /*device*/);

  /// Nothing to release.
  static void teardown() {}
};

}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/accelerators/impl/cpu.ipp>
#endif

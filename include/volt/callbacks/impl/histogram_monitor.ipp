/// \file
/// Definitions of the functions declared in volt/callbacks/histogram_monitor.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt {

VOLT_INLINE HistogramMonitor::HistogramMonitor(HistogramMonitorOptions options)
    : options_(options) {
  if (options_.every_n_steps < 1 || options_.bins < 1) {
    throw MisconfigurationError("HistogramMonitor: every_n_steps and bins must be >= 1 (got every_n_steps=" +
                                std::to_string(options_.every_n_steps) + ", bins=" + std::to_string(options_.bins) + ")");
  }
}

}  // namespace volt

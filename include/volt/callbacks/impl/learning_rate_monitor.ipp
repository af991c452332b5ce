/// \file
/// Definitions of the functions declared in volt/callbacks/learning_rate_monitor.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE std::string optimizer_name(const torch::optim::Optimizer& optimizer) {
  std::string name = typeid(optimizer).name();
#if __has_include(<cxxabi.h>)
  int status = 0;
  if (char* demangled = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status); status == 0) {
    name = demangled;
    std::free(demangled);
  }
#endif
  if (const auto colon = name.rfind("::"); colon != std::string::npos) name = name.substr(colon + 2);
  return name;
}

}  // namespace volt::detail

namespace volt {

VOLT_INLINE LearningRateMonitor::LearningRateMonitor(LearningRateMonitorOptions options)
    : options_(std::move(options)) {
  if (!options_.logging_interval.empty() && options_.logging_interval != "step" &&
      options_.logging_interval != "epoch") {
    throw MisconfigurationError("logging_interval should be `step` or `epoch` or `None`.");
  }
}

}  // namespace volt

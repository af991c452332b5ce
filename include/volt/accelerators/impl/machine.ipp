/// \file
/// Definitions of the functions declared in volt/accelerators/machine.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::machine::detail {

VOLT_INLINE ProbeState& probe_state() {
  static ProbeState state;
  return state;
}

VOLT_INLINE std::string real_processor() {
#if defined(__APPLE__)
  int translated = 0;
  std::size_t size = sizeof(translated);
  // sysctl.proc_translated is 1 for a process that Rosetta translates; it is absent on Intel Macs.
  if (sysctlbyname("sysctl.proc_translated", &translated, &size, nullptr, 0) == 0 && translated == 1) return "i386";
#if defined(__aarch64__) || defined(__arm64__)
  return "arm";
#else
  return "i386";
#endif
#elif defined(__aarch64__) || defined(__arm64__)
  return "arm64";
#elif defined(__arm__)
  return "arm";
#elif defined(__x86_64__) || defined(_M_X64)
  return "x86_64";
#elif defined(__i386__) || defined(_M_IX86)
  return "i386";
#else
  return "";
#endif
}
}  // namespace volt::machine::detail

namespace volt::machine {

VOLT_INLINE int cuda_device_count() {
  {
    auto& state = detail::probe_state();
    std::lock_guard lock(state.mutex);
    if (state.fake != nullptr) return state.fake->cuda_device_count;
  }
  return compat::torch_cuda_device_count();
}

VOLT_INLINE bool torch_mps_available() {
  {
    auto& state = detail::probe_state();
    std::lock_guard lock(state.mutex);
    if (state.fake != nullptr) return state.fake->torch_mps_available;
  }
  return compat::torch_mps_available();
}

VOLT_INLINE std::string processor() {
  {
    auto& state = detail::probe_state();
    std::lock_guard lock(state.mutex);
    if (state.fake != nullptr) return state.fake->processor;
  }
  static const std::string real = detail::real_processor();
  return real;
}

}  // namespace volt::machine

/// \file
/// Definitions of the functions declared in volt/distributed/rendezvous.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE std::chrono::milliseconds rendezvous_report_interval(std::chrono::milliseconds timeout) {
  return std::clamp(timeout / 5, std::chrono::milliseconds(1000), std::chrono::milliseconds(30000));
}

VOLT_INLINE std::string utc_time_text(std::chrono::system_clock::time_point when) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(when);
  std::tm parts{};
#if defined(_WIN32)
  gmtime_s(&parts, &seconds);
#else
  gmtime_r(&seconds, &parts);
#endif
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S UTC", &parts);
  return text;
}

}  // namespace volt::detail

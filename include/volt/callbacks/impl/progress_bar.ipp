/// \file
/// Definitions of the functions declared in volt/callbacks/progress_bar.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt {

VOLT_INLINE std::string ProgressBar::clock_text(double seconds) {
  const auto total = static_cast<long long>(seconds + 0.5);
  char buffer[32];
  if (total >= 3600) {
    std::snprintf(buffer, sizeof buffer, "%lld:%02lld:%02lld", total / 3600, total / 60 % 60, total % 60);
  } else {
    std::snprintf(buffer, sizeof buffer, "%02lld:%02lld", total / 60, total % 60);
  }
  return buffer;
}

VOLT_INLINE bool ProgressBar::terminal() const {
  if (options_.terminal) return *options_.terminal;
  if (options_.stream != nullptr) return false;
#if defined(_WIN32)
  return _isatty(2) != 0;
#else
  return ::isatty(2) != 0;
#endif
}

}  // namespace volt

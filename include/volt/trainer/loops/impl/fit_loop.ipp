/// \file
/// Definitions of the functions declared in volt/trainer/loops/fit_loop.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE AnomalyDetection::AnomalyDetection(bool enabled)
    : was_enabled_(torch::autograd::AnomalyMode::is_enabled()), was_checking_nan_(torch::autograd::AnomalyMode::should_check_nan()) {
  if (enabled) torch::autograd::AnomalyMode::set_enabled(true, /*check_nan=*/true);
}

// Out of line: a program does not compile the loops' construction and destruction again (with
// VOLT_SEPARATE_COMPILATION).
VOLT_INLINE FitLoop::FitLoop() = default;
VOLT_INLINE FitLoop::~FitLoop() = default;

}  // namespace volt::detail

/// \file
/// Definitions of the functions declared in volt/optim/implementation.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::optim {

VOLT_INLINE Implementation parse_implementation(std::string_view text) {
  for (auto candidate : {Implementation::automatic, Implementation::fused, Implementation::multi_tensor,
                         Implementation::per_parameter}) {
    if (to_string(candidate) == text) return candidate;
  }
  throw std::invalid_argument("volt: unknown optimizer step implementation \"" + std::string(text) +
                              "\"; use automatic, fused, multi_tensor or per_parameter");
}
}  // namespace volt::optim

namespace volt::optim::detail {

VOLT_INLINE std::atomic<Implementation>& default_implementation_slot() noexcept {
  static std::atomic<Implementation> slot{Implementation::automatic};
  return slot;
}
}  // namespace volt::optim::detail

namespace volt::optim {

VOLT_INLINE Implementation default_implementation() noexcept {
  return detail::default_implementation_slot().load(std::memory_order_relaxed);
}

VOLT_INLINE void set_default_implementation(Implementation implementation) noexcept {
  detail::default_implementation_slot().store(implementation, std::memory_order_relaxed);
}
}  // namespace volt::optim

namespace volt::optim::detail {

VOLT_INLINE StepCounts& thread_step_counts() noexcept {
  thread_local StepCounts counts;
  return counts;
}

VOLT_INLINE void count_step(Implementation implementation) noexcept {
  auto& counts = thread_step_counts();
  if (implementation == Implementation::fused) ++counts.fused;
  if (implementation == Implementation::multi_tensor) ++counts.multi_tensor;
  if (implementation == Implementation::per_parameter) ++counts.per_parameter;
}
}  // namespace volt::optim::detail

namespace volt::optim {

VOLT_INLINE StepCounts step_counts() noexcept { return detail::thread_step_counts(); }

VOLT_INLINE void reset_step_counts() noexcept { detail::thread_step_counts() = {}; }

}  // namespace volt::optim

/// \file
/// Definitions of the functions declared in volt/testing/scoped_machine.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::testing {

VOLT_INLINE ScopedMachine::ScopedMachine(Options options)
    : options_(std::move(options)) {
  auto& state = machine::detail::probe_state();
  std::lock_guard lock(state.mutex);
  previous_ = std::exchange(state.fake, &options_);
  state.mps_available_cache = -1;
}

VOLT_INLINE ScopedMachine::~ScopedMachine() {
  auto& state = machine::detail::probe_state();
  std::lock_guard lock(state.mutex);
  state.fake = previous_;
  state.mps_available_cache = -1;
}

}  // namespace volt::testing

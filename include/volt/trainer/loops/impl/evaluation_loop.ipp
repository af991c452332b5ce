/// \file
/// Definitions of the functions declared in volt/trainer/loops/evaluation_loop.hpp: compiled in every translation
/// unit (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

#include <string>

namespace volt::detail {

VOLT_INLINE std::string EvaluationLoop::batch_context(const TrainerState& state, const char* kind,
                                                      std::int64_t batch_idx) {
  return "epoch " + std::to_string(state.current_epoch) + ", " + kind + " batch " + std::to_string(batch_idx);
}

}  // namespace volt::detail

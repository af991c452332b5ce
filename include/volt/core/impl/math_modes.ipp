/// \file
/// Definitions of the functions declared in volt/core/math_modes.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE void set_math_modes(Float32MatmulPrecision matmul_precision, std::optional<bool> benchmark,
                                Deterministic deterministic) {
  if (deterministic.is_on()) {
    if (!benchmark) {
      benchmark = false;
    } else if (*benchmark) {
      log::warn_rank_zero(deterministic_with_benchmark_warning);
    }
  }
  if (benchmark) at::globalContext().setBenchmarkCuDNN(*benchmark);
  switch (deterministic.mode()) {
    case Deterministic::Mode::warn: at::globalContext().setDeterministicAlgorithms(true, true); break;
    case Deterministic::Mode::on: at::globalContext().setDeterministicAlgorithms(true, false); break;
    case Deterministic::Mode::off: at::globalContext().setDeterministicAlgorithms(false, false); break;
    case Deterministic::Mode::unset: break;
  }
  if (deterministic.is_on()) ::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", 1);
  if (matmul_precision.is_set()) at::globalContext().setFloat32MatmulPrecision(std::string(matmul_precision.name()));
}

VOLT_INLINE Float32MatmulPrecision current_float32_matmul_precision() {
  switch (at::globalContext().float32MatmulPrecision()) {
    case at::Float32MatmulPrecision::HIGH: return Float32MatmulPrecision::Level::high;
    case at::Float32MatmulPrecision::MEDIUM: return Float32MatmulPrecision::Level::medium;
    default: return Float32MatmulPrecision::Level::highest;
  }
}
}  // namespace volt::detail

namespace volt {

VOLT_INLINE auto Deterministic::parse(std::string_view text) -> Deterministic {
  Deterministic value;
  value.mode_ = mode_of(text, true);
  return value;
}

}  // namespace volt

namespace volt::detail {

[[noreturn]] VOLT_INLINE void float32_matmul_precision_must_be_highest_high_or_medium(std::string_view given) {
  throw MisconfigurationError("`float32_matmul_precision` must be \"highest\", \"high\" or \"medium\", got \"" +
                              std::string(given) + "\".");
}

[[noreturn]] VOLT_INLINE void deterministic_must_be_true_false_or_warn(std::string_view given) {
  throw MisconfigurationError("`deterministic` must be true, false or \"warn\", got \"" + std::string(given) + "\".");
}

}  // namespace volt::detail

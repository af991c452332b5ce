// A float32_matmul_precision literal other than "highest", "high" or "medium" does not compile (torch only
// warns and keeps its setting; volt refuses it where it is written).
// expect: float32_matmul_precision_must_be_highest_high_or_medium
#include <volt/trainer/options.hpp>

namespace trainer_float32_matmul_precision_literal {

volt::TrainerOptions options() {
#ifndef VOLT_COMPILE_FAIL_CONTROL
  return {.float32_matmul_precision = "hihg"};
#else
  return {.float32_matmul_precision = "high"};
#endif
}

}  // namespace trainer_float32_matmul_precision_literal

// `deterministic` takes true, false or "warn": any other literal does not compile.
// expect: deterministic_must_be_true_false_or_warn
#include <volt/trainer/options.hpp>

namespace trainer_deterministic_literal {

volt::TrainerOptions options() {
#ifndef VOLT_COMPILE_FAIL_CONTROL
  return {.deterministic = "warning"};
#else
  return {.deterministic = "warn"};
#endif
}

}  // namespace trainer_deterministic_literal

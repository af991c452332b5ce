// `deterministic` takes true, false or "warn": an integer is not taken as a truth value.
// expect: use of deleted function .*Deterministic
#include <volt/trainer/options.hpp>

namespace trainer_deterministic_integer {

volt::TrainerOptions options() {
#ifndef VOLT_COMPILE_FAIL_CONTROL
  return {.deterministic = 1};
#else
  return {.deterministic = true};
#endif
}

}  // namespace trainer_deterministic_integer

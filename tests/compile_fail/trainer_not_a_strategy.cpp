// A type that is no strategy policy is refused by the Trainer's template head, naming the concept.
// expect: template constraint failure .*StrategyPolicy
#include <volt/volt.hpp>

namespace trainer_not_a_strategy {

struct NotAStrategy {};

#ifdef VOLT_COMPILE_FAIL_CONTROL
using Strategy = volt::SingleDevice;
#else
using Strategy = NotAStrategy;
#endif

volt::Trainer<volt::CPU, Strategy>* make(volt::TrainerOptions options) {
  return new volt::Trainer<volt::CPU, Strategy>(options);
}

}  // namespace trainer_not_a_strategy

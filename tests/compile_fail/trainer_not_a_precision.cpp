// A type that is no precision policy is refused by the Trainer's template head, naming the concept.
// expect: template constraint failure .*PrecisionPolicy
#include <volt/volt.hpp>

namespace trainer_not_a_precision {

struct NotAPrecision {
  static constexpr const char* name = "8-bits";
};

#ifdef VOLT_COMPILE_FAIL_CONTROL
using Precision = volt::BF16Autocast;
#else
using Precision = NotAPrecision;
#endif

volt::Trainer<volt::CPU, volt::SingleDevice, Precision>* make(volt::TrainerOptions options) {
  return new volt::Trainer<volt::CPU, volt::SingleDevice, Precision>(options);
}

}  // namespace trainer_not_a_precision

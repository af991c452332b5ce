// A user's own rule, added by specializing volt::precision_supported, is enforced with the generic message.
// expect: volt: this precision policy is not supported on this accelerator
#include <volt/precision/compatibility.hpp>

namespace precision_user_rule {
struct MyAccelerator {};
}  // namespace precision_user_rule

template <>
struct volt::precision_supported<precision_user_rule::MyAccelerator, volt::FP16True> : std::false_type {};

namespace precision_user_rule {

void use() {
#ifndef VOLT_COMPILE_FAIL_CONTROL
  volt::check_precision_supported<MyAccelerator, volt::FP16True>();
#else
  volt::check_precision_supported<MyAccelerator, volt::BF16True>();
#endif
}

}  // namespace precision_user_rule

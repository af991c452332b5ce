// Sets or unsets an environment variable for one scope (tests of DISABLE_MPS, TORCHELASTIC_RUN_ID, RANK).
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace volt_test {

class ScopedEnv {
 public:
  /// `value == nullptr` unsets the variable.
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) previous_ = old;
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (previous_) {
      ::setenv(name_, previous_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> previous_;
};

}  // namespace volt_test

/// \file
/// volt::optim::Implementation: which implementation runs an optimizer step, and what actually ran.
///
/// The choices are LibTorch's own per-parameter loop, volt's multi-tensor (foreach) ops, or LibTorch's fused
/// kernels. This header holds the process-wide default, a scoped override of it, and per-thread counters of
/// what actually ran.
#pragma once

#include <volt/core/linkage.hpp>
#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace volt::optim {

/// An optimizer-step implementation, from the fastest to the plainest. Requesting one is a ceiling, not
/// a demand: volt::optim::step() runs the requested one where the optimizer, its options and its
/// parameters allow it, else the next one down, and reports what ran.
enum class Implementation {
  /// The fastest measured: Adam and AdamW fused where LibTorch has the kernel for the device (CUDA; CPU from
  /// LibTorch 2.4), else multi_tensor; SGD multi_tensor on CUDA and per_parameter on CPU (foreach ops save
  /// no launches on a CPU).
  automatic,
  /// LibTorch's fused kernels (`at::_fused_adam_`, `at::_fused_adamw_`; LibTorch 2.1+, CUDA, and CPU from
  /// 2.4): one kernel for all parameters of a param group and dtype. Adam and AdamW only.
  fused,
  /// `at::_foreach_*` ops: one op per update term for all parameters of a param group. Adam, AdamW, SGD.
  multi_tensor,
  /// `optimizer.step()`: LibTorch's own loop over the parameters, any optimizer.
  per_parameter,
};

/// "automatic", "fused", "multi_tensor", "per_parameter".
constexpr std::string_view to_string(Implementation implementation) noexcept {
  switch (implementation) {
    case Implementation::automatic: return "automatic";
    case Implementation::fused: return "fused";
    case Implementation::multi_tensor: return "multi_tensor";
    case Implementation::per_parameter: return "per_parameter";
  }
  return "unknown";
}

/// The Implementation named `text` (one of to_string's names). Throws std::invalid_argument otherwise.
VOLT_INLINE Implementation parse_implementation(std::string_view text);

namespace detail {
VOLT_INLINE std::atomic<Implementation>& default_implementation_slot() noexcept;
}  // namespace detail

/// The implementation volt::optim::step(optimizer) requests when none is given, which is what every
/// precision policy, the GradScaler and so the Trainer and Fabric use. Starts as automatic.
VOLT_INLINE Implementation default_implementation() noexcept;

/// Sets the process-wide default; per_parameter opts out of volt's optimizer steps everywhere (every
/// optimizer.step() is LibTorch's own again). Thread-safe; takes effect at the next step.
VOLT_INLINE void set_default_implementation(Implementation implementation) noexcept;

/// Sets the default implementation for its lifetime and restores the previous one on destruction. The
/// default is process-wide, so the scope affects every thread's steps; nest scopes in LIFO order.
class [[nodiscard]] ScopedDefaultImplementation {
 public:
  /// Remembers the current default and sets `implementation`.
  explicit ScopedDefaultImplementation(Implementation implementation) noexcept
      : previous_(default_implementation()) {
    set_default_implementation(implementation);
  }
  ~ScopedDefaultImplementation() { set_default_implementation(previous_); }
  ScopedDefaultImplementation(const ScopedDefaultImplementation&) = delete;
  ScopedDefaultImplementation& operator=(const ScopedDefaultImplementation&) = delete;

 private:
  Implementation previous_;
};

/// How many optimizer steps this thread ran with each implementation, counted by volt::optim::step():
/// a diagnostic to confirm which path a training loop takes.
struct StepCounts {
  std::int64_t fused = 0;          ///< Steps where every param group ran LibTorch's fused kernel.
  std::int64_t multi_tensor = 0;   ///< Steps that ran volt's foreach ops (in at least one param group).
  std::int64_t per_parameter = 0;  ///< Steps that ran `optimizer.step()`.
};

namespace detail {
VOLT_INLINE StepCounts& thread_step_counts() noexcept;
VOLT_INLINE void count_step(Implementation implementation) noexcept;
}  // namespace detail

/// This thread's counts since it started or since reset_step_counts().
VOLT_INLINE StepCounts step_counts() noexcept;
/// Sets this thread's counts to zero.
VOLT_INLINE void reset_step_counts() noexcept;

}  // namespace volt::optim

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/optim/impl/implementation.ipp>
#endif

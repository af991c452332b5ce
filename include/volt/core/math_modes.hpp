/// \file
/// The math modes of a run: float32 matmul precision (TF32 on tensor cores), cuDNN's benchmark mode and
/// deterministic algorithms, as TrainerOptions and FabricOptions take them.
///
/// Lightning's Trainer sets `benchmark` and `deterministic` when it is constructed
/// (`_set_torch_flags` in its accelerator connector) and never restores them; volt does the same, and treats
/// `float32_matmul_precision` (which Lightning leaves to `torch.set_float32_matmul_precision`) the same way.
/// These are process-wide LibTorch settings: the last Trainer or Fabric constructed with a value wins.
///
/// A string literal given to Float32MatmulPrecision or Deterministic is checked at compile time
/// (`.float32_matmul_precision = "hihg"` does not compile); text known only at run time (a command line)
/// goes through their `parse` functions, which throw MisconfigurationError.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/errors.hpp>
#include <volt/core/log.hpp>

#include <torch/torch.h>

#include <cstddef>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

namespace volt {

namespace detail {
// Reached only for a bad value. Not constexpr on purpose: in constant evaluation (a string literal given to
// a consteval constructor) the call is the compile error, and its name says what is wrong.
[[noreturn]] VOLT_INLINE void float32_matmul_precision_must_be_highest_high_or_medium(std::string_view given);
[[noreturn]] VOLT_INLINE void deterministic_must_be_true_false_or_warn(std::string_view given);
}  // namespace detail

/// How float32 matrix multiplications may run (torch.set_float32_matmul_precision): "highest" (full
/// float32), "high" (TF32 tensor cores where the GPU has them, or bfloat16x3), "medium" (bfloat16 allowed).
/// Default-constructed: unset, LibTorch's setting is left as it is ("highest" unless changed).
///
/// On CUDA GPUs with tensor cores (compute capability 8.0 and up) "high" and "medium" run float32 matmuls
/// in TF32; cuDNN convolutions use TF32 by default whatever it says (LibTorch's allow_tf32 for cuDNN, which
/// volt leaves alone). On the CPU, LibTorch 2.x may use oneDNN's bfloat16 matmul at "medium" on processors
/// with native bfloat16; otherwise the CPU computes in float32. docs/math-modes.md has the details.
class Float32MatmulPrecision {
 public:
  /// The three levels, in torch's order.
  enum class Level : unsigned char { unset, highest, high, medium };

  /// Unset: LibTorch's setting is left alone.
  constexpr Float32MatmulPrecision() = default;
  /// "highest", "high" or "medium"; any other literal does not compile.
  template <std::size_t N>
  consteval Float32MatmulPrecision(const char (&name)[N])  // NOLINT(google-explicit-constructor)
      : level_(level_of(std::string_view(name, N - 1))) {}
  /// A level.
  constexpr Float32MatmulPrecision(Level level) : level_(level) {}  // NOLINT(google-explicit-constructor)

  /// The value of run-time text ("highest", "high", "medium"); throws MisconfigurationError naming what
  /// was given and what is allowed.
  static Float32MatmulPrecision parse(std::string_view name) { return Float32MatmulPrecision(level_of(name)); }

  /// Whether a level was given.
  constexpr bool is_set() const { return level_ != Level::unset; }
  /// The level (Level::unset when none was given).
  constexpr Level level() const { return level_; }
  /// torch's name of the level ("highest", "high", "medium"), or "" when unset.
  constexpr std::string_view name() const {
    switch (level_) {
      case Level::highest: return "highest";
      case Level::high: return "high";
      case Level::medium: return "medium";
      case Level::unset: break;
    }
    return "";
  }
  /// Equal when both hold the same level (or both are unset).
  friend constexpr bool operator==(Float32MatmulPrecision, Float32MatmulPrecision) = default;

 private:
  static constexpr Level level_of(std::string_view name) {
    if (name == "highest") return Level::highest;
    if (name == "high") return Level::high;
    if (name == "medium") return Level::medium;
    detail::float32_matmul_precision_must_be_highest_high_or_medium(name);
  }
  Level level_ = Level::unset;
};

/// Lightning's `deterministic` flag: true (LibTorch's deterministic algorithms only: an operation without
/// one throws), false (any algorithm), "warn" (deterministic where possible, a warning for the operations
/// that have none). Default-constructed: unset, LibTorch's setting is left as it is.
///
/// Set (true or "warn"), it also turns cuDNN's benchmark mode off unless `benchmark` is given, and sets
/// `CUBLAS_WORKSPACE_CONFIG=:4096:8` in the environment (cuBLAS needs it for reproducible results), as
/// Lightning does. Any other value, such as the integer 1, does not compile.
class Deterministic {
 public:
  /// The three settings.
  enum class Mode : unsigned char { unset, off, on, warn };

  /// Unset: LibTorch's setting is left alone.
  constexpr Deterministic() = default;
  /// true or false.
  constexpr Deterministic(bool on) : mode_(on ? Mode::on : Mode::off) {}  // NOLINT(google-explicit-constructor)
  /// "warn"; any other literal does not compile.
  template <std::size_t N>
  consteval Deterministic(const char (&name)[N])  // NOLINT(google-explicit-constructor)
      : mode_(mode_of(std::string_view(name, N - 1), false)) {}
  /// Deleted, so that an integer or a pointer is not taken as true.
  template <class T>
  Deterministic(T) = delete;

  /// The value of run-time text ("true", "false" or "warn", as a command line gives it); throws
  /// MisconfigurationError naming what was given and what is allowed.
  static Deterministic parse(std::string_view text);

  /// Whether a value was given.
  constexpr bool is_set() const { return mode_ != Mode::unset; }
  /// true or "warn" (Lightning's `if deterministic:`).
  constexpr bool is_on() const { return mode_ == Mode::on || mode_ == Mode::warn; }
  /// The setting.
  constexpr Mode mode() const { return mode_; }
  /// "true", "false", "warn", or "" when unset.
  constexpr std::string_view name() const {
    switch (mode_) {
      case Mode::on: return "true";
      case Mode::off: return "false";
      case Mode::warn: return "warn";
      case Mode::unset: break;
    }
    return "";
  }
  /// Equal when both hold the same setting (or both are unset).
  friend constexpr bool operator==(Deterministic, Deterministic) = default;

 private:
  static constexpr Mode mode_of(std::string_view text, bool booleans) {
    if (text == "warn") return Mode::warn;
    if (booleans && text == "true") return Mode::on;
    if (booleans && text == "false") return Mode::off;
    detail::deterministic_must_be_true_false_or_warn(text);
  }
  Mode mode_ = Mode::unset;
};

namespace detail {

/// The text of Lightning's warning for deterministic with benchmark on.
inline constexpr std::string_view deterministic_with_benchmark_warning =
    "You passed `deterministic=True` and `benchmark=True`. Note that PyTorch ignores "
    "torch.backends.cudnn.deterministic=True when torch.backends.cudnn.benchmark=True.";

/// Sets LibTorch's process-wide math modes as Lightning's `_set_torch_flags` does (deterministic first decides
/// benchmark's default; benchmark is set only when known; deterministic algorithms are switched only when
/// `deterministic` is set), and the float32 matmul precision when given.
VOLT_INLINE void set_math_modes(Float32MatmulPrecision matmul_precision, std::optional<bool> benchmark,
                                Deterministic deterministic);

/// LibTorch's current float32 matmul precision.
VOLT_INLINE Float32MatmulPrecision current_float32_matmul_precision();

}  // namespace detail
}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/core/impl/math_modes.ipp>
#endif

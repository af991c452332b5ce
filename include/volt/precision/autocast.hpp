/// \file
/// Scope guards that the precision policies return from forward_context(): autocast, a default dtype, or
/// nothing at all.
///
/// All three are RAII types that can be neither copied nor moved: a policy returns them as prvalues
/// (guaranteed copy elision), and the caller keeps them alive for exactly the scope of one step.
/// Autocast and the default dtype are thread-local in LibTorch, so a guard must be destroyed on the
/// thread that created it.
#pragma once

#include <volt/core/compat.hpp>
#include <volt/core/linkage.hpp>

#include <torch/torch.h>

#include <stdexcept>
#include <string>

namespace volt {

/// The guard of the FP32 policy: does nothing and compiles to nothing. Its destructor is user-provided
/// only so that `auto scope = precision.forward_context();` is not flagged as an unused variable.
class [[nodiscard]] NoOpGuard {
 public:
  NoOpGuard() = default;
  ~NoOpGuard() {}  // NOLINT(modernize-use-equals-default): a trivial destructor triggers -Wunused-variable
  NoOpGuard(const NoOpGuard&) = delete;
  NoOpGuard& operator=(const NoOpGuard&) = delete;
};

/// Sets LibTorch's default floating dtype (the dtype of `torch::ones({2})`, `torch::tensor({1.0})`, new
/// parameters) for its lifetime and restores the previous one on destruction, as Lightning's
/// `HalfPrecision`/`DoublePrecision` forward contexts do with `torch.set_default_dtype`.
class [[nodiscard]] DefaultDtypeGuard {
 public:
  /// Throws std::invalid_argument when `dtype` is not a floating dtype (LibTorch would accept it and
  /// then build integer "floating" tensors).
  explicit DefaultDtypeGuard(c10::ScalarType dtype) : previous_(c10::get_default_dtype()) {
    if (!c10::isFloatingType(dtype)) {
      throw std::invalid_argument(std::string("volt: the default dtype must be a floating dtype, got ") +
                                  c10::toString(dtype) + "; use Float, Double, Half or BFloat16");
    }
    c10::set_default_dtype(caffe2::TypeMeta::fromScalarType(dtype));
  }
  ~DefaultDtypeGuard() { c10::set_default_dtype(previous_); }
  DefaultDtypeGuard(const DefaultDtypeGuard&) = delete;
  DefaultDtypeGuard& operator=(const DefaultDtypeGuard&) = delete;

 private:
  caffe2::TypeMeta previous_;
};

/// How an AutocastGuard configures its scope.
struct AutocastOptions {
  /// false opens a scope with autocast switched off (PyTorch's `autocast(enabled=False)`), e.g. to run
  /// a numerically sensitive block in full precision inside a mixed-precision step.
  bool enabled = true;
  /// Whether casts of leaf tensors that require grad (the weights) are cached inside the scope.
  bool cache_enabled = true;
};

/// PyTorch's `torch.autocast(device_type, dtype)` as an RAII scope, over LibTorch 1.13's per-backend and
/// 2.4+'s per-device-type autocast switches.
///
/// On entry it records the device type's enabled flag and autocast dtype and the global cache flag, then
/// switches autocast on (or off) with `dtype` and increments the autocast nesting depth. On exit it
/// restores all three, and when the outermost autocast scope of the thread exits it clears the cache
/// of cast weights, so that casts made for one step do not outlive it (what PyTorch's `__exit__` does).
class [[nodiscard]] AutocastGuard {
 public:
  /// Throws std::runtime_error, changing nothing, when `options.enabled` and this LibTorch cannot
  /// autocast to `dtype` on `device_type` (for example MPS before LibTorch 2.4, fp16 on CPU in 1.13).
  AutocastGuard(c10::DeviceType device_type, c10::ScalarType dtype, AutocastOptions options = {});
  ~AutocastGuard();

  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

  /// The device type whose autocast state this guard switched and restores.
  c10::DeviceType device_type() const noexcept { return device_type_; }

 private:
  c10::DeviceType device_type_;
  bool previous_enabled_ = false;
  bool previous_cache_enabled_ = true;
  bool dtype_known_ = false;
  c10::ScalarType previous_dtype_ = c10::ScalarType::Undefined;
};

/// torch::NoGradGuard that also clears the autocast cache when it exits, what Lightning's mixed-precision
/// forward_context does to every `torch.no_grad()` block inside a step. Autocast caches the fp16/bf16 casts
/// of the weights; a cast made under no-grad has no autograd history, and if a later grad-mode use in the
/// same autocast scope reused it, those weights would silently get no gradient. Use it instead of
/// torch::NoGradGuard inside steps that run under autocast; outside autocast it costs one cache clear.
class [[nodiscard]] AutocastSafeNoGradGuard {
 public:
  AutocastSafeNoGradGuard() = default;
  ~AutocastSafeNoGradGuard() { compat::autocast_clear_cache(); }
  AutocastSafeNoGradGuard(const AutocastSafeNoGradGuard&) = delete;
  AutocastSafeNoGradGuard& operator=(const AutocastSafeNoGradGuard&) = delete;

 private:
  torch::NoGradGuard no_grad_;
};

}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/precision/impl/autocast.ipp>
#endif

/// \file
/// The precision policies: Lightning's precision plugins as small types the Trainer and Fabric hold by value.
///
/// ```
///   volt::FP32          "32-true"     nothing changes (the default)
///   volt::FP64          "64-true"     module, floating inputs and the default dtype become float64
///   volt::FP16True      "16-true"     ... become float16
///   volt::BF16True      "bf16-true"   ... become bfloat16
///   volt::FP16Autocast  "16-mixed"    fp32 weights, steps under fp16 autocast, loss scaled by a GradScaler
///   volt::BF16Autocast  "bf16-mixed"  fp32 weights, steps under bf16 autocast, no scaler
/// ```
///
/// Every policy has the same interface, in the order the host calls it:
///
/// ```
///   setup(root_device)              once, before training (the device the strategy resolved)
///   convert_module(module)          once, after setup
///   convert_input(batch)            per batch
///   forward_context()               RAII guard around each training/validation/test/predict step
///   pre_backward(loss)              the tensor to call backward() on (the scaled loss with a scaler)
///   optimizer_step(opt, before)     unscale -> before() (hooks, clipping) -> step unless inf/NaN -> update
///                                   (the step is volt::optim::step: multi-tensor/fused Adam, AdamW, SGD)
///   scaler(), save(), load()        the GradScaler and its checkpoint state
/// ```
///
/// None of them is thread-safe; forward_context()'s guard must be destroyed on the thread that made it.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/apply.hpp>
#include <volt/core/compat.hpp>
#include <volt/core/errors.hpp>
#include <volt/core/log.hpp>
#include <volt/optim/step.hpp>
#include <volt/precision/autocast.hpp>
#include <volt/precision/compatibility.hpp>
#include <volt/precision/grad_scaler.hpp>

#include <torch/torch.h>

#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace volt {

namespace detail {

/// Shared implementation of the "true" precisions (Lightning's Precision, HalfPrecision and
/// DoublePrecision): the whole model and every floating input live in `Dtype`; new tensors default to it
/// inside the contexts. For float32 (volt::FP32, LibTorch's default dtype) nothing is converted: the module,
/// the inputs and the default dtype are left as they are (a float64 input stays float64), and the contexts are
/// NoOpGuards that cost nothing. Stateless.
template <c10::ScalarType Dtype>
class TruePrecision {
 public:
  static constexpr bool is_autocast = false;
  static constexpr c10::ScalarType dtype = Dtype;
  /// Whether the policy converts anything: false for float32, the identity.
  static constexpr bool converts = Dtype != c10::ScalarType::Float;
  /// What init_context() and forward_context() return.
  using ContextGuard = std::conditional_t<converts, DefaultDtypeGuard, NoOpGuard>;

  void setup(torch::Device /*root_device*/) noexcept {}

  /// Casts every floating parameter and buffer (and existing gradient) of `module` and its children to
  /// `Dtype`, leaving integer buffers such as BatchNorm's num_batches_tracked alone, as PyTorch's
  /// `module.to(dtype)` does (LibTorch's Module::to would cast those too). Float32: leaves the module as it is.
  void convert_module([[maybe_unused]] torch::nn::Module& module) noexcept(!converts) {
    if constexpr (converts) {
      torch::NoGradGuard no_grad;
      for (auto& parameter : module.parameters(/*recurse=*/true)) {
        if (!parameter.is_floating_point()) continue;
        parameter.set_data(parameter.to(Dtype));
        if (parameter.grad().defined()) parameter.mutable_grad() = parameter.grad().to(Dtype);
      }
      for (auto& buffer : module.buffers(/*recurse=*/true)) {
        if (buffer.is_floating_point()) buffer.set_data(buffer.to(Dtype));
      }
    }
  }

  /// `batch` with every floating tensor inside cast to `Dtype`; integer and bool tensors and non-tensor
  /// members are kept as they are. Same type as `batch`. Float32: `batch` unchanged (moved when given an
  /// rvalue).
  template <class Batch>
  std::remove_cvref_t<Batch> convert_input(Batch&& batch) {
    if constexpr (converts) {
      return apply_to_collection(std::forward<Batch>(batch), [](const torch::Tensor& tensor) -> torch::Tensor {
        return tensor.is_floating_point() ? tensor.to(Dtype) : tensor;
      });
    } else {
      return std::forward<Batch>(batch);
    }
  }

  /// Default dtype `Dtype` while the module is built (Lightning's tensor_init_context); float32: a guard that
  /// changes nothing.
  [[nodiscard]] ContextGuard init_context() const noexcept(!converts) { return make_guard(); }
  /// Default dtype `Dtype` for the step, so tensors the step creates match the model; float32: a guard that
  /// changes nothing.
  [[nodiscard]] ContextGuard forward_context() const noexcept(!converts) { return make_guard(); }

  /// Returns `loss` itself: backward() is called on it unscaled.
  torch::Tensor pre_backward(const torch::Tensor& loss) const { return loss; }

  /// Runs `before_step()` then the optimizer step (volt::optim::step: multi-tensor or fused for LibTorch's
  /// Adam, AdamW and SGD, optimizer.step() otherwise); returns true. Throws what they throw.
  template <class BeforeStep>
  bool optimizer_step(torch::optim::Optimizer& optimizer, BeforeStep&& before_step) {
    std::forward<BeforeStep>(before_step)();
    optim::step(optimizer);
    return true;
  }

  /// nullptr (of type std::nullptr_t, so that code for a GradScaler is not compiled): no loss scaling.
  std::nullptr_t scaler() const noexcept { return nullptr; }
  /// Nothing to save in checkpoints.
  void save(torch::serialize::OutputArchive& /*archive*/) const noexcept {}
  /// Nothing to restore from checkpoints.
  void load(torch::serialize::InputArchive& /*archive*/) noexcept {}

 private:
  static ContextGuard make_guard() noexcept(!converts) {
    if constexpr (converts) {
      return DefaultDtypeGuard(Dtype);
    } else {
      return {};
    }
  }
};

/// Lightning's AMP optimizer step with a GradScaler: unscale_ the gradients, run `before_step()` (the
/// on_before_optimizer_step hooks and gradient clipping see unscaled gradients), call optimizer.step()
/// unless a gradient is inf/NaN, update the scale. Returns whether optimizer.step() ran.
/// Throws what GradScaler::unscale_/step/update, `before_step` and the optimizer throw.
template <class BeforeStep>
bool amp_optimizer_step(GradScaler& scaler, torch::optim::Optimizer& optimizer, BeforeStep&& before_step) {
  // Already unscaled when a manual-optimization model clipped this optimizer's gradients before its step.
  if (scaler.stage(optimizer) == GradScaler::Stage::ready) scaler.unscale_(optimizer);
  std::forward<BeforeStep>(before_step)();
  const bool stepped = scaler.step(optimizer);
  scaler.update();
  return stepped;
}

inline constexpr std::string_view fp16_autocast_on_cpu_warning =
    "You passed `precision='16-mixed'` (volt::FP16Autocast) and the accelerator resolved to 'cpu', but AMP "
    "with fp16 is not supported on CPU. Using `precision='bf16-mixed'` (volt::BF16Autocast) instead.";

/// Shared implementation of the mixed precisions (Lightning's MixedPrecision): fp32 weights, each step under
/// autocast to `RequestedDtype` on the root device's type, and for fp16 a GradScaler.
template <c10::ScalarType RequestedDtype>
class AutocastPrecision {
  // Only fp16 scales the loss; bf16 compiles none of the GradScaler's code.
  static constexpr bool may_scale = RequestedDtype == c10::ScalarType::Half;

 public:
  static constexpr bool is_autocast = true;

  /// `scaler_options` configure the GradScaler of fp16 (ignored for bf16, which needs no scaler).
  explicit AutocastPrecision(GradScalerOptions scaler_options = {}) : scaler_options_(scaler_options) {}

  /// Resolves the autocast device type and dtype for `root_device` and logs Lightning's info line (rank 0).
  /// fp16 on a CPU device (an Auto accelerator that found no GPU) warns once and runs as bf16, as Lightning
  /// does. Creates the GradScaler on `root_device` for fp16 (kept if setup runs again or load() made it).
  /// Throws MisconfigurationError when this LibTorch cannot autocast to the dtype on that device type.
  void setup(torch::Device root_device) {
    auto resolved_dtype = RequestedDtype;
    if (RequestedDtype == c10::ScalarType::Half && root_device.is_cpu()) {
      log::warn_once(fp16_autocast_on_cpu_warning);
      resolved_dtype = c10::ScalarType::BFloat16;
    }
    if (!compat::autocast_dtype_supported(root_device.type(), resolved_dtype)) {
      throw MisconfigurationError(std::string("volt: mixed precision with ") + c10::toString(resolved_dtype) +
                                  " needs autocast on device type " + c10::DeviceTypeName(root_device.type()) +
                                  ", which this LibTorch (" + compat::torch_version_string +
                                  ") does not support; use volt::FP32 or a newer LibTorch");
    }
    log::info_rank_zero(resolved_dtype == c10::ScalarType::Half
                            ? "Using 16bit Automatic Mixed Precision (AMP)"
                            : "Using bfloat16 Automatic Mixed Precision (AMP)");
    device_type_ = root_device.type();
    dtype_ = resolved_dtype;
    if constexpr (may_scale) {
      if (dtype_ == c10::ScalarType::Half) {
        if (!scaler_) scaler_.emplace(scaler_options_, root_device);
      } else {
        scaler_.reset();
      }
    }
  }

  /// Mixed precision keeps the weights in fp32: does nothing.
  void convert_module(torch::nn::Module& /*module*/) noexcept {}

  /// Returns `batch` unchanged (moved when given an rvalue): autocast casts per operation, and Lightning's
  /// Trainer does not convert inputs under mixed precision.
  template <class Batch>
  std::remove_cvref_t<Batch> convert_input(Batch&& batch) {
    return std::forward<Batch>(batch);
  }

  [[nodiscard]] NoOpGuard init_context() const noexcept { return {}; }

  /// Autocast to the resolved dtype on the root device's type for the guard's lifetime; the cache of cast
  /// weights is cleared when the outermost autocast scope exits. Throws std::logic_error before setup().
  [[nodiscard]] AutocastGuard forward_context() const {
    if (!device_type_) throw std::logic_error("volt: call setup(root_device) on the precision policy before forward_context()");
    return AutocastGuard(*device_type_, dtype_);
  }

  /// The tensor to call backward() on: the loss times the scale with a GradScaler, else `loss`.
  torch::Tensor pre_backward(const torch::Tensor& loss) {
    if constexpr (may_scale) {
      if (scaler_) return scaler_->scale(loss);
    }
    return loss;
  }

  /// Lightning's AMP step: with a scaler, unscale_ the gradients, run `before_step()` (hooks and clipping
  /// see unscaled gradients), step unless a gradient is inf/NaN, update the scale. Without one,
  /// `before_step()` then the step. Returns whether the optimizer stepped. The step is volt::optim::step
  /// (multi-tensor or fused for LibTorch's Adam, AdamW and SGD, optimizer.step() otherwise).
  /// Throws MisconfigurationError for LBFGS ("AMP and the LBFGS optimizer are not compatible."), what the
  /// GradScaler throws (see GradScaler::step), and what `before_step` and the optimizer throw.
  template <class BeforeStep>
  bool optimizer_step(torch::optim::Optimizer& optimizer, BeforeStep&& before_step) {
    if (dynamic_cast<torch::optim::LBFGS*>(&optimizer) != nullptr) {
      throw MisconfigurationError("AMP and the LBFGS optimizer are not compatible.");
    }
    if constexpr (may_scale) {
      if (scaler_) return amp_optimizer_step(*scaler_, optimizer, std::forward<BeforeStep>(before_step));
    }
    std::forward<BeforeStep>(before_step)();
    optim::step(optimizer);
    return true;
  }

  /// fp16: the GradScaler (after setup() or load()), else nullptr. bf16: nullptr of type std::nullptr_t.
  auto scaler() noexcept {
    if constexpr (may_scale) {
      return scaler_ ? &*scaler_ : static_cast<GradScaler*>(nullptr);
    } else {
      return nullptr;
    }
  }
  /// As scaler(), to read.
  auto scaler() const noexcept {
    if constexpr (may_scale) {
      return scaler_ ? &*scaler_ : static_cast<const GradScaler*>(nullptr);
    } else {
      return nullptr;
    }
  }

  /// The dtype autocast uses: RequestedDtype, or bf16 after setup() on a CPU device for fp16.
  c10::ScalarType autocast_dtype() const noexcept { return dtype_; }
  /// The autocast device type, known after setup().
  std::optional<c10::DeviceType> device_type() const noexcept { return device_type_; }

  /// Writes the GradScaler's state (see GradScaler::save); nothing without a scaler.
  void save(torch::serialize::OutputArchive& archive) const {
    if constexpr (may_scale) {
      if (scaler_) scaler_->save(archive);
    }
  }

  /// Restores the GradScaler's state, creating the scaler if load() runs before setup(). bf16: no-op.
  /// Throws std::runtime_error when the archive holds no scaler state (see GradScaler::load).
  void load(torch::serialize::InputArchive& archive) {
    if constexpr (may_scale) {
      if (dtype_ != c10::ScalarType::Half) return;
      if (!scaler_) scaler_.emplace(scaler_options_);
      scaler_->load(archive);
    }
  }

 private:
  GradScalerOptions scaler_options_;
  std::optional<c10::DeviceType> device_type_;
  c10::ScalarType dtype_ = RequestedDtype;
  std::optional<GradScaler> scaler_;
};

}  // namespace detail

/// "32-true": full precision, the identity everywhere (Lightning's Precision): the module, the inputs and
/// the default dtype are left as they are. Stateless, and its guard costs nothing.
struct FP32 : detail::TruePrecision<c10::ScalarType::Float> {
  /// Lightning's precision name, used in messages and by the command line.
  static constexpr std::string_view name = "32-true";
};

/// "64-true": model, floating inputs and new tensors in float64 (Lightning's DoublePrecision).
struct FP64 : detail::TruePrecision<c10::ScalarType::Double> {
  /// Lightning's precision name, used in messages and by the command line.
  static constexpr std::string_view name = "64-true";

  /// Throws MisconfigurationError on an MPS device (an Auto or GPU accelerator that resolved to MPS):
  /// Metal has no float64. volt::MPS with FP64 does not compile at all.
  void setup(torch::Device root_device);
};

/// "16-true": model, floating inputs and new tensors in float16 (Lightning's HalfPrecision).
struct FP16True : detail::TruePrecision<c10::ScalarType::Half> {
  /// Lightning's precision name, used in messages and by the command line.
  static constexpr std::string_view name = "16-true";

  /// On a CPU: checks that this LibTorch multiplies float16 matrices there (LibTorch 1.13 does not) and throws
  /// MisconfigurationError naming the precision and what to use instead, so the run is refused at set-up
  /// rather than at its first forward. Other devices: nothing to check.
  void setup(torch::Device root_device);
};

/// "bf16-true": model, floating inputs and new tensors in bfloat16 (Lightning's HalfPrecision).
struct BF16True : detail::TruePrecision<c10::ScalarType::BFloat16> {
  /// Lightning's precision name, used in messages and by the command line.
  static constexpr std::string_view name = "bf16-true";
};

/// "16-mixed": fp16 autocast with dynamic loss scaling (Lightning's MixedPrecision("16-mixed")). On a CPU
/// device it runs as bf16 with a warning; volt::CPU with FP16Autocast does not compile.
struct FP16Autocast : detail::AutocastPrecision<c10::ScalarType::Half> {
  /// Lightning's precision name, used in messages and by the command line.
  static constexpr std::string_view name = "16-mixed";
  using AutocastPrecision::AutocastPrecision;
};

/// "bf16-mixed": bf16 autocast, no loss scaling (Lightning's MixedPrecision("bf16-mixed")).
struct BF16Autocast : detail::AutocastPrecision<c10::ScalarType::BFloat16> {
  /// Lightning's precision name, used in messages and by the command line.
  static constexpr std::string_view name = "bf16-mixed";
  using AutocastPrecision::AutocastPrecision;
};

}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/precision/impl/policies.ipp>
#endif

/// \file
/// volt::GradScaler: dynamic loss scaling for fp16 mixed precision (PyTorch's torch.amp.GradScaler, which
/// LibTorch lacks in every version).
///
/// fp16 gradients of small losses underflow to zero. The scaler multiplies the loss by a large factor before
/// backward, divides the gradients by it before the optimizer step, skips the step when a gradient overflowed
/// to inf/NaN, and adapts the factor: halve it after an overflow, double it after `growth_interval`
/// consecutive finite steps. The algorithm and the error messages follow PyTorch's Python GradScaler.
///
/// The scale, the growth tracker and the found-inf flags are tensors on the device, so unscale_() and
/// update() never wait for the GPU; step() reads the found-inf flag once, because it must decide on the
/// host whether to call optimizer.step().
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/compat.hpp>
#include <volt/optim/step.hpp>
#include <volt/precision/detail/grad_scaler_ops.hpp>

#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace volt {

/// Construction options of GradScaler; PyTorch's defaults.
struct GradScalerOptions {
  /// The first scale (2^16); the first iterations usually back it off until gradients are finite.
  double init_scale = 65536.0;
  /// Factor applied after `growth_interval` consecutive steps without inf/NaN; must be > 1.
  double growth_factor = 2.0;
  /// Factor applied after a step with inf/NaN gradients; must be < 1.
  double backoff_factor = 0.5;
  /// Consecutive finite steps before the scale grows; must be > 0.
  std::int64_t growth_interval = 2000;
  /// A disabled scaler passes losses through, steps unconditionally and has no state.
  bool enabled = true;
  /// Use LibTorch's fused kernels on devices that have them (see compat::amp_scaler_kernels_available)
  /// for fp32/fp64 gradients; false forces the plain tensor-op path everywhere (same results; for tests
  /// and debugging). bf16 gradients always take the plain path (CUDA's fused kernel rejects them).
  bool use_fused_kernels = true;
};

/// A GradScaler's persistent state, the five entries of PyTorch's `GradScaler.state_dict()`.
struct GradScalerState {
  /// The current scale (PyTorch's "scale").
  double scale = 65536.0;
  /// PyTorch's "growth_factor".
  double growth_factor = 2.0;
  /// PyTorch's "backoff_factor".
  double backoff_factor = 0.5;
  /// PyTorch's "growth_interval".
  std::int64_t growth_interval = 2000;
  /// Consecutive finite steps since the last growth or backoff (PyTorch's `_growth_tracker`).
  std::int64_t growth_tracker = 0;
};

/// Dynamic loss scaler. Per iteration, for each optimizer:
///
///     auto scaled = scaler.scale(loss); scaled.backward();
///     scaler.unscale_(optimizer);          // optional: to clip or inspect unscaled gradients
///     scaler.step(optimizer);              // unscales if not done yet; skips the step on inf/NaN
///     scaler.update();                     // once per iteration, after every optimizer stepped
///
/// Optimizers are told apart by identity (address), as PyTorch keys them by `id(optimizer)`; the
/// bookkeeping of an iteration is dropped by update(). Not thread-safe.
class GradScaler {
 public:
  /// Where an optimizer stands in the current iteration.
  enum class Stage { ready, unscaled, stepped };

  /// The scale tensor is created on the device of the first tensor passed to scale().
  /// Throws std::invalid_argument when enabled with growth_factor <= 1, backoff_factor >= 1 or
  /// growth_interval <= 0.
  explicit GradScaler(GradScalerOptions options = {});

  /// Creates the scale on `device` right away (what the precision policies do with the root device).
  /// Throws as the other constructor, and what LibTorch throws for an unusable device.
  GradScaler(GradScalerOptions options, torch::Device device);

  /// Whether the scaler scales (GradScalerOptions::enabled); a disabled one is a pass-through.
  bool is_enabled() const noexcept { return options_.enabled; }

  /// `outputs` multiplied by the current scale (a new tensor; autograd sees the multiplication).
  /// Returns `outputs` unchanged when disabled.
  torch::Tensor scale(const torch::Tensor& outputs);

  /// Divides the gradients of `optimizer`'s parameters by the scale, in place, and records on the device
  /// whether any of them is inf/NaN. Call it at most once per optimizer between update()s, after every
  /// gradient of the iteration was accumulated. No-op when disabled.
  /// Throws std::runtime_error when called twice or after step() in one iteration, or before any scale();
  /// std::invalid_argument when a gradient is fp16 (fp16 parameters cannot be unscaled safely: train
  /// fp32 parameters under autocast instead).
  void unscale_(torch::optim::Optimizer& optimizer);

  /// Unscales `optimizer`'s gradients unless unscale_() already did, then steps the optimizer only if no
  /// gradient was inf/NaN. Returns whether the optimizer stepped. This is the one place that reads the
  /// found-inf flag on the host. When disabled, steps unconditionally.
  /// The step is volt::optim::step(optimizer): multi-tensor or fused for LibTorch's Adam, AdamW and SGD
  /// (per volt::optim::default_implementation()), optimizer.step() otherwise. Fused kernels get already
  /// unscaled gradients and run only when the host saw no inf/NaN, so a skipped step leaves the
  /// optimizer's state (step counts included) untouched, as with optimizer.step().
  /// Throws std::runtime_error when called twice in one iteration, when no parameter of `optimizer` has a
  /// gradient, or before any scale(); whatever the optimizer step throws.
  bool step(torch::optim::Optimizer& optimizer);

  /// Adapts the scale from the inf/NaN checks of every optimizer unscaled this iteration: times
  /// backoff_factor if any found inf/NaN, else times growth_factor when this completes growth_interval
  /// finite steps in a row (and only if the grown scale is finite). Runs on the device without waiting
  /// for it. Then forgets the iteration's per-optimizer bookkeeping. No-op when disabled.
  /// Throws std::runtime_error before any scale() or when no optimizer was unscaled or stepped.
  void update();

  /// unscale_() and update()'s device work for a step captured in a CUDA graph, without the host-side
  /// iteration bookkeeping (nothing is read back or remembered, so both can be captured and replayed):
  /// zeroes `found_inf` (a float32 scalar on the scale's device), divides `optimizer`'s gradients by the
  /// scale in place and sets `found_inf` to 1 where any is inf/NaN. The optimizer step that follows must
  /// honour `found_inf` itself (volt::optim::CapturableStep does). No-op when disabled; throws
  /// std::runtime_error before any scale().
  void unscale_on_device(torch::optim::Optimizer& optimizer, torch::Tensor& found_inf);

  /// update()'s scale adaptation from `found_inf` (as unscale_on_device() set it), on the device only.
  /// No-op when disabled; throws std::runtime_error before any scale().
  void update_on_device(const torch::Tensor& found_inf);

  /// Sets the scale to `new_scale` instead of adapting it, and forgets the iteration's bookkeeping.
  /// No-op when disabled. Throws std::runtime_error before any scale().
  void update(double new_scale);

  /// The current scale: init_scale before the first scale(), 1.0 when disabled. Waits for the device.
  double get_scale() const;

  /// The scale as a 0-dim float32 device tensor (undefined before the first scale() or when disabled);
  /// reading it does not synchronise.
  const torch::Tensor& scale_tensor() const noexcept { return scale_; }

  /// Consecutive finite steps since the last growth or backoff. Waits for the device.
  std::int64_t growth_tracker() const;

  /// The factor the scale grows by after growth_interval finite steps.
  double growth_factor() const noexcept { return options_.growth_factor; }
  /// The factor the scale shrinks by after a step with inf/NaN gradients.
  double backoff_factor() const noexcept { return options_.backoff_factor; }
  /// Consecutive finite steps before the scale grows.
  std::int64_t growth_interval() const noexcept { return options_.growth_interval; }
  /// Sets the growth factor for later update() calls. Not validated (unlike the constructor): keep it > 1.
  void set_growth_factor(double factor) noexcept { options_.growth_factor = factor; }
  /// Sets the backoff factor for later update() calls. Not validated (unlike the constructor): keep it < 1.
  void set_backoff_factor(double factor) noexcept { options_.backoff_factor = factor; }
  /// Sets the growth interval for later update() calls. Not validated (unlike the constructor): keep it > 0.
  void set_growth_interval(std::int64_t interval) noexcept { options_.growth_interval = interval; }

  /// Where `optimizer` stands in the current iteration (ready before unscale_ and after update()).
  Stage stage(const torch::optim::Optimizer& optimizer) const;

  /// The state to checkpoint (call it after update()); std::nullopt when disabled, as PyTorch returns {}.
  /// Waits for the device.
  std::optional<GradScalerState> state_dict() const;

  /// Restores a state from state_dict(). No-op when disabled.
  void load_state_dict(const GradScalerState& state);

  /// Writes state_dict() into `archive` under PyTorch's key names ("scale", "growth_factor",
  /// "backoff_factor", "growth_interval", "_growth_tracker"); writes nothing when disabled.
  void save(torch::serialize::OutputArchive& archive) const;

  /// Reads what save() wrote. No-op when disabled. Throws std::runtime_error when the archive holds no
  /// scaler state (saved from a disabled scaler or by another precision) or only part of it.
  void load(torch::serialize::InputArchive& archive);

 private:
  using PerDeviceTensors = detail::PerDeviceTensors;

  struct OptimizerState {
    Stage stage = Stage::ready;
    PerDeviceTensors found_inf_per_device;
  };

  void initialize_scale(torch::Device device);

  void require_scale(const char* function) const;

  bool use_fused(c10::DeviceType device_type) const;

  /// The fused unscale kernel is used for fp32 and fp64 gradients only: CUDA's kernel rejects bf16
  /// ("not implemented for 'BFloat16'"), and fp16 gradients are refused before this point.
  bool fused_unscale_takes(c10::DeviceType device_type, c10::ScalarType dtype) const;

  PerDeviceTensors unscale_gradients(torch::optim::Optimizer& optimizer, const torch::Tensor& inv_scale,
                                     const torch::Tensor& found_inf);

  /// What `_amp_update_scale_` computes, for backends without it (see detail::update_scale_with_tensor_ops).
  void update_scale_with_tensor_ops(const torch::Tensor& found_inf);

  static c10::IValue read_entry(torch::serialize::InputArchive& archive, const char* key);

  GradScalerOptions options_;
  std::int64_t initial_growth_tracker_ = 0;
  torch::Tensor scale_;           // 0-dim float32 on the device of the first scaled loss
  torch::Tensor growth_tracker_;  // 0-dim int32 next to scale_
  std::unordered_map<const torch::optim::Optimizer*, OptimizerState> optimizer_states_;
};

}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/precision/impl/grad_scaler.ipp>
#endif

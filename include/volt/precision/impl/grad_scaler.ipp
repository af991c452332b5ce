/// \file
/// Definitions of the functions declared in volt/precision/grad_scaler.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt {

VOLT_INLINE GradScaler::GradScaler(GradScalerOptions options, torch::Device device)
    : GradScaler(options) {
  if (options_.enabled) initialize_scale(device);
}

VOLT_INLINE torch::Tensor GradScaler::scale(const torch::Tensor& outputs) {
  if (!options_.enabled) return outputs;
  if (!scale_.defined()) initialize_scale(outputs.device());
  return outputs * scale_.to(outputs.device(), /*non_blocking=*/true);
}

VOLT_INLINE void GradScaler::unscale_(torch::optim::Optimizer& optimizer) {
  if (!options_.enabled) return;
  require_scale("unscale_");
  auto& state = optimizer_states_[&optimizer];
  if (state.stage == Stage::unscaled) {
    throw std::runtime_error("unscale_() has already been called on this optimizer since the last update().");
  }
  if (state.stage == Stage::stepped) throw std::runtime_error("unscale_() is being called after step().");

  // The reciprocal is taken in fp64 because fp32 division can be imprecise under some compile options;
  // MPS has no fp64.
  const auto inv_scale = scale_.device().is_mps() ? scale_.reciprocal()
                                                  : scale_.to(torch::kDouble).reciprocal().to(torch::kFloat);
  auto found_inf = torch::zeros({}, scale_.options().dtype(torch::kFloat));
  state.found_inf_per_device = unscale_gradients(optimizer, inv_scale, found_inf);
  state.stage = Stage::unscaled;
}

VOLT_INLINE bool GradScaler::step(torch::optim::Optimizer& optimizer) {
  if (!options_.enabled) {
    optim::step(optimizer);
    return true;
  }
  require_scale("step");
  if (optimizer_states_[&optimizer].stage == Stage::stepped) {
    throw std::runtime_error("step() has already been called since the last update().");
  }
  if (optimizer_states_[&optimizer].stage == Stage::ready) unscale_(optimizer);
  auto& state = optimizer_states_[&optimizer];
  if (state.found_inf_per_device.empty()) {
    throw std::runtime_error(
        "No inf checks were recorded for this optimizer. (volt: none of its parameters has a gradient; "
        "run backward on the scaled loss before step())");
  }
  bool skip = false;
  for (const auto& [device, found_inf] : state.found_inf_per_device) {
    if (found_inf.item<float>() != 0.0F) {
      skip = true;
      break;
    }
  }
  if (!skip) optim::step(optimizer);
  state.stage = Stage::stepped;
  return !skip;
}

VOLT_INLINE void GradScaler::update() {
  if (!options_.enabled) return;
  require_scale("update");
  torch::Tensor found_inf_combined;
  for (const auto& [optimizer, state] : optimizer_states_) {
    for (const auto& [device, found_inf] : state.found_inf_per_device) {
      auto here = found_inf.to(scale_.device(), /*non_blocking=*/true);
      found_inf_combined = found_inf_combined.defined() ? found_inf_combined + here : here;
    }
  }
  if (!found_inf_combined.defined()) throw std::runtime_error("No inf checks were recorded prior to update.");

  if (use_fused(scale_.device().type())) {
    at::_amp_update_scale_(scale_, growth_tracker_, found_inf_combined, options_.growth_factor,
                           options_.backoff_factor, options_.growth_interval);
  } else {
    update_scale_with_tensor_ops(found_inf_combined);
  }
  optimizer_states_.clear();
}

VOLT_INLINE void GradScaler::unscale_on_device(torch::optim::Optimizer& optimizer, torch::Tensor& found_inf) {
  if (!options_.enabled) return;
  require_scale("unscale_on_device");
  found_inf.zero_();
  const auto inv_scale = scale_.to(torch::kDouble).reciprocal().to(torch::kFloat);
  unscale_gradients(optimizer, inv_scale, found_inf);
}

VOLT_INLINE void GradScaler::update_on_device(const torch::Tensor& found_inf) {
  if (!options_.enabled) return;
  require_scale("update_on_device");
  if (use_fused(scale_.device().type())) {
    at::_amp_update_scale_(scale_, growth_tracker_, found_inf, options_.growth_factor, options_.backoff_factor,
                           options_.growth_interval);
  } else {
    update_scale_with_tensor_ops(found_inf);
  }
}

VOLT_INLINE void GradScaler::update(double new_scale) {
  if (!options_.enabled) return;
  require_scale("update");
  scale_.fill_(new_scale);
  optimizer_states_.clear();
}

VOLT_INLINE double GradScaler::get_scale() const {
  if (!options_.enabled) return 1.0;
  return scale_.defined() ? static_cast<double>(scale_.item<float>()) : options_.init_scale;
}

VOLT_INLINE std::int64_t GradScaler::growth_tracker() const {
  if (!options_.enabled) return 0;
  return growth_tracker_.defined() ? static_cast<std::int64_t>(growth_tracker_.item<int>())
                                   : initial_growth_tracker_;
}

VOLT_INLINE auto GradScaler::stage(const torch::optim::Optimizer& optimizer) const -> Stage {
  const auto it = optimizer_states_.find(&optimizer);
  return it == optimizer_states_.end() ? Stage::ready : it->second.stage;
}

VOLT_INLINE auto GradScaler::state_dict() const -> std::optional<GradScalerState> {
  if (!options_.enabled) return std::nullopt;
  return GradScalerState{get_scale(), options_.growth_factor, options_.backoff_factor, options_.growth_interval,
                         growth_tracker()};
}

VOLT_INLINE void GradScaler::load_state_dict(const GradScalerState& state) {
  if (!options_.enabled) return;
  options_.init_scale = state.scale;
  options_.growth_factor = state.growth_factor;
  options_.backoff_factor = state.backoff_factor;
  options_.growth_interval = state.growth_interval;
  initial_growth_tracker_ = state.growth_tracker;
  if (scale_.defined()) scale_.fill_(state.scale);
  if (growth_tracker_.defined()) growth_tracker_.fill_(state.growth_tracker);
}

VOLT_INLINE void GradScaler::save(torch::serialize::OutputArchive& archive) const {
  const auto state = state_dict();
  if (!state) return;
  archive.write("scale", c10::IValue(state->scale));
  archive.write("growth_factor", c10::IValue(state->growth_factor));
  archive.write("backoff_factor", c10::IValue(state->backoff_factor));
  archive.write("growth_interval", c10::IValue(state->growth_interval));
  archive.write("_growth_tracker", c10::IValue(state->growth_tracker));
}

VOLT_INLINE void GradScaler::load(torch::serialize::InputArchive& archive) {
  if (!options_.enabled) return;
  c10::IValue value;
  if (!archive.try_read("scale", value)) {
    throw std::runtime_error(
        "The source state dict is empty, possibly because it was saved from a disabled instance of "
        "GradScaler.");
  }
  GradScalerState state;
  state.scale = value.toDouble();
  state.growth_factor = read_entry(archive, "growth_factor").toDouble();
  state.backoff_factor = read_entry(archive, "backoff_factor").toDouble();
  state.growth_interval = read_entry(archive, "growth_interval").toInt();
  state.growth_tracker = read_entry(archive, "_growth_tracker").toInt();
  load_state_dict(state);
}

VOLT_INLINE void GradScaler::initialize_scale(torch::Device device) {
  scale_ = torch::full({}, options_.init_scale, torch::TensorOptions().dtype(torch::kFloat).device(device));
  growth_tracker_ = torch::full({}, initial_growth_tracker_, torch::TensorOptions().dtype(torch::kInt).device(device));
}

VOLT_INLINE void GradScaler::require_scale(const char* function) const {
  if (!scale_.defined()) {
    throw std::runtime_error(std::string("Attempted ") + function +
                             " but _scale is None.  This may indicate your script did not use "
                             "scaler.scale(loss or outputs) earlier in the iteration.");
  }
}

VOLT_INLINE bool GradScaler::use_fused(c10::DeviceType device_type) const {
  return options_.use_fused_kernels && compat::amp_scaler_kernels_available(device_type);
}

VOLT_INLINE bool GradScaler::fused_unscale_takes(c10::DeviceType device_type, c10::ScalarType dtype) const {
  return (dtype == torch::kFloat || dtype == torch::kDouble) && use_fused(device_type);
}

VOLT_INLINE auto GradScaler::unscale_gradients(torch::optim::Optimizer& optimizer, const torch::Tensor& inv_scale,
                                               const torch::Tensor& found_inf) -> PerDeviceTensors {
  torch::NoGradGuard no_grad;
  auto groups = detail::gradients_by_device_and_dtype(optimizer);
  PerDeviceTensors found_inf_per_device;
  PerDeviceTensors inv_scale_per_device;
  for (auto& group : groups) {
    auto device_found_inf = detail::replica_on(found_inf_per_device, found_inf, group.device);
    const auto device_inv_scale = detail::replica_on(inv_scale_per_device, inv_scale, group.device);
    if (fused_unscale_takes(group.device.type(), group.dtype)) {
      at::_amp_foreach_non_finite_check_and_unscale_(group.gradients, device_found_inf, device_inv_scale);
    } else {
      detail::unscale_with_tensor_ops(group.gradients, device_found_inf, device_inv_scale);
    }
  }
  return found_inf_per_device;
}

VOLT_INLINE void GradScaler::update_scale_with_tensor_ops(const torch::Tensor& found_inf) {
  detail::update_scale_with_tensor_ops(scale_, growth_tracker_, found_inf, options_.growth_factor,
                                       options_.backoff_factor, options_.growth_interval);
}

VOLT_INLINE auto GradScaler::read_entry(torch::serialize::InputArchive& archive, const char* key) -> c10::IValue {
  c10::IValue value;
  if (!archive.try_read(key, value)) {
    throw std::runtime_error(std::string("volt: the GradScaler state in this checkpoint lacks \"") + key +
                             "\"; it was not written by GradScaler::save()");
  }
  return value;
}

}  // namespace volt

namespace volt {

VOLT_INLINE GradScaler::GradScaler(GradScalerOptions options)
    : options_(options) {
  if (!options_.enabled) return;
  if (!(options_.growth_factor > 1.0)) throw std::invalid_argument("The growth factor must be > 1.0.");
  if (!(options_.backoff_factor < 1.0)) throw std::invalid_argument("The backoff factor must be < 1.0.");
  if (options_.growth_interval <= 0) {
    throw std::invalid_argument("volt: GradScaler growth_interval must be > 0, got " +
                                std::to_string(options_.growth_interval));
  }
}

}  // namespace volt

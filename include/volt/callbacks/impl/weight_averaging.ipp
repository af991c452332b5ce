/// \file
/// Definitions of the functions declared in volt/callbacks/weight_averaging.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt {

VOLT_INLINE WeightAveraging::WeightAveraging(WeightAveragingOptions options)
    : options_(std::move(options)) {
  if (!options_.avg_fn) options_.avg_fn = swa_average();
}

VOLT_INLINE void WeightAveraging::save_state(torch::serialize::OutputArchive& archive) const {
  average_.save(archive);
  archive.write("latest_update_step", c10::IValue(latest_update_step_));
  archive.write("latest_update_epoch", c10::IValue(latest_update_epoch_));
}

VOLT_INLINE void WeightAveraging::load_state(torch::serialize::InputArchive& archive) {
  restored_ = average_.load(archive);
  c10::IValue value;
  archive.read("latest_update_step", value);
  latest_update_step_ = value.toInt();
  archive.read("latest_update_epoch", value);
  latest_update_epoch_ = value.toInt();
}

VOLT_INLINE bool WeightAveraging::wants_update(std::optional<std::int64_t> step_idx,
                                               std::optional<std::int64_t> epoch_idx) const {
  if (options_.should_update) return options_.should_update(step_idx, epoch_idx);
  return step_idx.has_value();
}

VOLT_INLINE auto EMAWeightAveraging::weight_averaging_options(const EMAWeightAveragingOptions& ema) -> WeightAveragingOptions {
  if (ema.update_every_n_steps < 0) {
    throw MisconfigurationError("EMAWeightAveraging: update_every_n_steps must be >= 0 (0: never after a step), got " +
                                std::to_string(ema.update_every_n_steps));
  }
  WeightAveragingOptions options;
  options.device = ema.device;
  options.use_buffers = ema.use_buffers;
  options.avg_fn = ema_average(ema.decay);
  options.should_update = [every = ema.update_every_n_steps, from_step = ema.update_starting_at_step,
                           from_epoch = ema.update_starting_at_epoch](std::optional<std::int64_t> step_idx,
                                                                      std::optional<std::int64_t> epoch_idx) {
    if (step_idx && (!from_step || *step_idx >= *from_step) && every > 0 && *step_idx % every == 0) return true;
    return epoch_idx && from_epoch && *epoch_idx >= *from_epoch;
  };
  return options;
}

}  // namespace volt

/// \file
/// Definitions of the functions declared in volt/callbacks/weight_averaging.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt {

VOLT_INLINE WeightAveraging::WeightAveraging(WeightAveragingOptions options)
    : options_(std::move(options)) {
  if (!options_.avg_fn) options_.avg_fn = swa_average();
}

VOLT_INLINE void WeightAveraging::on_save_checkpoint(CheckpointSave& checkpoint) {
  if (!average_.ready()) {
    log::info_rank_zero("You're using the WeightAveraging callback, but saving a checkpoint outside the 'fit' stage. "
                        "The state of the WeightAveraging callback won't be saved in the checkpoint. If training has "
                        "finished, the average model parameters will be saved to the state_dict in the checkpoint.");
    return;
  }
  torch::serialize::OutputArchive current;
  checkpoint.write_module_weights(current);
  checkpoint.write("current_model_state", current);
  torch::serialize::OutputArchive averaging;
  averaging.write("n_averaged", c10::IValue(average_.n_averaged()));
  checkpoint.write("averaging_state", averaging);
  torch::serialize::OutputArchive averaged;
  checkpoint.write_weights(averaged, average_.parameters(), average_.buffers());
  checkpoint.replace_model_entry(std::move(averaged));
}

VOLT_INLINE void WeightAveraging::on_load_checkpoint(CheckpointLoad& checkpoint) {
  torch::serialize::InputArchive averaging;
  if (!checkpoint.contains("current_model_state") || !checkpoint.try_read("averaging_state", averaging)) {
    log::warn_rank_zero("The checkpoint was not created with WeightAveraging. Both the current and the average model "
                        "will be initialized with state_dict.");
    restored_ = false;
    return;
  }
  c10::IValue n_averaged;
  averaging.read("n_averaged", n_averaged);
  average_.take(checkpoint.module(), n_averaged.toInt());
  checkpoint.load_module_weights("current_model_state");
  restored_ = true;
  log::info_rank_zero("Found current_model_state in the checkpoint. This will be used to initialize the model.");
}

VOLT_INLINE void WeightAveraging::save_state(torch::serialize::OutputArchive& archive) const {
  archive.write("latest_update_step", c10::IValue(latest_update_step_));
  archive.write("latest_update_epoch", c10::IValue(latest_update_epoch_));
}

VOLT_INLINE void WeightAveraging::load_state(torch::serialize::InputArchive& archive) {
  c10::IValue value;
  archive.read("latest_update_step", value);
  latest_update_step_ = value.toInt();
  archive.read("latest_update_epoch", value);
  latest_update_epoch_ = value.toInt();
  counters_restored_ = true;
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

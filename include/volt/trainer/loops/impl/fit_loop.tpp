/// \file
/// The fit loop's member templates that depend only on the Trainer's parts, not on the model or the data
/// (volt/trainer/loops/fit_loop.hpp declares them). They are templates, so every translation unit sees them; with
/// VOLT_SEPARATE_COMPILATION, volt's own policies get them compiled once in volt::compiled
/// (volt/trainer/instantiations.hpp), and a program does not compile them again.
#pragma once

namespace volt::detail {

template <class Parts>
void FitLoop::reset_state(Parts& parts, bool has_val_data) {
  const auto& options = parts.options;
  auto& state = parts.state;
  parts.logger.metrics().clear();
  state.stage = Stage::fitting;
  state.should_stop = false;
  state.validation_has_run = false;
  state.global_step = 0;
  state.current_epoch = 0;
  state.fast_dev_run = options.fast_dev_run > 0;
  state.max_steps = options.max_steps;
  state.max_epochs = options.max_epochs;
  if (!state.max_epochs) {
    if (options.max_steps == -1) {
      log::warn_rank_zero("`max_epochs` was not set. Setting it to 1000 epochs. To train without an epoch "
                          "limit, set `max_epochs=-1`.");
      state.max_epochs = 1000;
    } else {
      state.max_epochs = -1;
    }
  }
  state.log_every_n_steps = options.log_every_n_steps;
  state.accumulate_grad_batches = options.accumulate_grad_batches;
  state.has_validation = has_val_data && !(options.limit_val_batches.is_fraction()
                                               ? options.limit_val_batches.fraction() == 0.0
                                               : options.limit_val_batches.count() == 0);
  state.validates_at_epoch_end =
      options.val_check_interval.is_whole_epoch() && options.check_val_every_n_epoch.value_or(0) == 1;
  state.device_stats = device_stats_probe(parts.selection.accelerator, parts.root_device());
}

template <class Parts>
void FitLoop::set_state_functions(Parts& parts, std::shared_ptr<torch::nn::Module> module) {
  auto& state = parts.state;
  state.decide_across_ranks = [&parts](bool value) { return parts.strategy.reduce_boolean_decision(value, false); };
  state.save_checkpoint = [this, &parts, module = std::move(module)](const std::filesystem::path& path,
                                                                       bool weights_only) {
    parts.state.last_checkpoint_saved = false;
    try {
      write_checkpoint(parts, *module, path, weights_only);
      parts.state.last_checkpoint_saved = true;
    } catch (const CheckpointError& error) {
      if (parts.state.stage == Stage::none || parts.options.on_checkpoint_failure == CheckpointFailure::raise) throw;
      log::warn_rank_zero(std::string(error.what()) + "; training continues (on_checkpoint_failure=warn).");
    }
  };
}

template <class Parts>
void FitLoop::restore(Parts& parts, torch::nn::Module& module, const std::filesystem::path& ckpt_path) {
  parts.checkpoint.reset();
  parts.checkpoint.extra_states = std::move(data_.states);
  if (!ckpt_path.empty()) {
    parts.checkpoint.restore(checkpoint_parts(parts, module), ckpt_path, parts.root_device());
    parts.apply_memory_format(module);  // the checkpoint holds contiguous weights
  }
}

template <class Parts>
std::map<std::string, double> FitLoop::end_epoch_values(Parts& parts) {
  auto& metrics = parts.logger.metrics();
  auto values = metrics.end_epoch(MetricPhase::train, parts.ranks_reducer());
  parts.callbacks.run_train_epoch_end(parts.state, /*monitoring=*/true);
  if (metrics.has_epoch_values(MetricPhase::train)) {
    for (auto& [key, value] : metrics.end_epoch(MetricPhase::train, parts.ranks_reducer())) values[key] = value;
  }
  return values;
}

template <class Parts>
void FitLoop::close_epoch(Parts& parts, const std::map<std::string, double>& values) {
  auto& state = parts.state;
  parts.log_metrics(values, std::max<std::int64_t>(0, state.global_step - 1));
  parts.optimization.step_schedulers(SchedulerInterval::epoch, state.current_epoch + 1);
  ++state.current_epoch;
  parts.checkpoint.resume_point = {state.current_epoch, 0, false};
  parts.agree_on_stop();
}

template <class Parts>
void FitLoop::end_succeeded(Parts& parts) {
  log::info_rank_zero("`Trainer.fit` stopped: " + stop_reason_ + ".");
  parts.logger.finalize("success");
  if (data_.teardown) data_.teardown();
  parts.callbacks.list().template run<Hook::teardown>(parts.state);
}

template <class Parts>
bool FitLoop::done(Parts& parts) {
  const auto& options = parts.options;
  const auto& state = parts.state;
  if (state.max_epochs && *state.max_epochs >= 0 && state.current_epoch >= *state.max_epochs) {
    stop_reason_ = "`max_epochs=" + std::to_string(*state.max_epochs) + "` reached";
    return true;
  }
  if (max_steps_reached(options, state)) {
    stop_reason_ = "`max_steps=" + std::to_string(options.max_steps) + "` reached";
    return true;
  }
  if (state.should_stop && min_training_done(options, state)) {
    stop_reason_ = "stopped by a callback (should_stop)";
    return true;
  }
  return false;
}

template <class Parts>
void FitLoop::end_interrupted(Parts& parts, torch::nn::Module& module) {
  const std::string name = interrupt_signal_name();
  stop_reason_ = "interrupted by " + name;
  std::string saved;
  auto& state = parts.state;
  if (auto* checkpoint = parts.callbacks.list().template find<ModelCheckpoint>();
      checkpoint != nullptr && parts.options.fast_dev_run == 0) {
    const auto folder = !checkpoint->dirpath().empty()
                            ? checkpoint->dirpath()
                            : std::filesystem::path(parts.options.default_root_dir) / "checkpoints";
    const auto path = folder / "interrupted.ckpt";
    try {
      write_checkpoint(parts, module, path, false);
      saved = "; resume with fit(..., \"" + path.string() + "\")";
    } catch (const CheckpointError& error) {
      log::warn_rank_zero(error.what());
    }
  }
  log::info_rank_zero("\nDetected " + name + ", attempting graceful shutdown after epoch " +
                      std::to_string(state.current_epoch) + ", batch " + std::to_string(state.batch_idx) +
                      " (global step " + std::to_string(state.global_step) + ")" + saved + ".");
  end_failed_run(parts.callbacks.list(), state, parts.logger,
                 std::make_exception_ptr(TrainingInterrupted("volt: training " + stop_reason_)));
  state.stage = Stage::none;
}

template <class Parts>
void FitLoop::write_checkpoint(Parts& parts, torch::nn::Module& module, const std::filesystem::path& path,
                               bool weights_only) {
  epoch_loop.step.graph().sync_optimizer_state();  // a captured step counts Adam's steps on the device
  std::optional<ProfileScope> profiled;  // profiler: Lightning's "save_checkpoint" action
  if (parts.state.profiler_) [[unlikely]] profiled.emplace(parts.state.profiler_, "save_checkpoint");
  parts.checkpoint.dump(checkpoint_parts(parts, module), path, weights_only);
}

}  // namespace volt::detail

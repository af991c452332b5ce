/// \file
/// The fit loop (Lightning's loops/fit_loop.py): a fit from its setup (optimizers, data sizes, the resume
/// point) through the hooks around training, the sanity check and the epochs, to the stop — done() names
/// every reason — including the graceful end after SIGINT or SIGTERM. Each epoch: on_train_epoch_start, the
/// epoch's batches (volt/trainer/loops/training_epoch_loop.hpp), on_train_epoch_end (the other callbacks, the
/// model, the monitoring callbacks) and then the epoch's row for the loggers, epoch-interval schedulers, and
/// the ranks' agreement on stopping.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/log.hpp>
#include <volt/core/range.hpp>
#include <volt/trainer/call.hpp>
#include <volt/trainer/connectors/accelerator_connector.hpp>
#include <volt/trainer/connectors/checkpoint_connector.hpp>
#include <volt/trainer/connectors/data_connector.hpp>
#include <volt/trainer/connectors/signal_connector.hpp>
#include <volt/trainer/loops/forward_epoch.hpp>
#include <volt/trainer/loops/training_epoch_loop.hpp>
#include <volt/trainer/module.hpp>
#include <volt/trainer/parts.hpp>

#include <torch/csrc/autograd/anomaly_mode.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace volt::detail {

/// LibTorch's autograd anomaly mode on for a scope when asked (TrainerOptions::detect_anomaly); the previous
/// mode comes back at the end.
class AnomalyDetection {
 public:
  /// Turns anomaly detection (with the NaN check) on when `enabled`.
  explicit AnomalyDetection(bool enabled);
  ~AnomalyDetection() { torch::autograd::AnomalyMode::set_enabled(was_enabled_, was_checking_nan_); }
  AnomalyDetection(const AnomalyDetection&) = delete;
  AnomalyDetection& operator=(const AnomalyDetection&) = delete;

 private:
  bool was_enabled_;
  bool was_checking_nan_;
};

/// Runs fit().
class FitLoop {
 public:
  /// The batches of each epoch.
  TrainingEpochLoop epoch_loop{};

  /// What a volt::DataModule adds to a fit.
  struct DataHooks {
    /// Adds the data's hyperparameters to the model's before they are logged; empty: none.
    std::function<void(std::map<std::string, std::string>&)> hparams{};
    /// State the fit's checkpoints hold besides its own (kept for save_checkpoint after the fit, until the next).
    std::vector<CheckpointConnector::ExtraState> states{};
    /// Runs after on_fit_end, before the callbacks' teardown, when the fit succeeded; empty: nothing.
    std::function<void()> teardown{};
  };
  /// For the next fit only (run() takes them over; a fit without a data module gets none).
  DataHooks data_hooks{};

  /// Why the last fit stopped.
  const std::string& stop_reason() const { return stop_reason_; }
  /// Whether the last fit returned early because of SIGINT or SIGTERM.
  bool interrupted() const { return epoch_loop.interrupted; }

  /// Trains `module` (the model's module) on `train_data`, validating on `val_data` (or NoData), resuming from
  /// `ckpt_path` when it is not empty.
  template <class Parts, class Model, class TrainData, class ValData>
  void run(Parts& parts, Model& model, TrainData& train_data, ValData& val_data, const std::filesystem::path& ckpt_path) {
    using M = module_t<Model>;
    using Batch = batch_t<TrainData>;
    check_trainable<M, Batch>();
    data_ = std::exchange(data_hooks, {});
    constexpr bool has_val_data = !std::is_same_v<std::remove_cvref_t<ValData>, NoData>;
    if constexpr (has_val_data) {
      static_assert(has_validation_step<M, batch_t<ValData>>,
                    "volt: fit() was given validation data, but the model has no `validation_step(batch[, "
                    "batch_idx[, ctx]])` for its batch type");
    }
    if constexpr (has_training_step<M, Batch> && has_configure_optimizers<M>) {
      auto module = model_module(model);
      TORCH_CHECK(module != nullptr, "volt: fit() was given an empty model pointer");
      // The pass over the training data that callbacks may run refers to train_data: gone with this fit.
      struct ForwardPassRelease {
        TrainerState& state;
        ~ForwardPassRelease() { state.forward_training_epoch = {}; }
      } forward_pass_release{parts.state};
      setup(parts, module, train_data, val_data, has_val_data, ckpt_path);
      // The graph and its memory live for this fit(); the optimizer's state is LibTorch's again afterwards.
      struct GraphRelease {
        TrainStepGraph& graph;
        ~GraphRelease() {
          try {
            graph.release();
          } catch (...) {
            // a device error here was already reported by the step that caused it
          }
        }
      } graph_release{epoch_loop.step.graph()};
      ScopedInterruptHandler interrupt_handler(parts.options.handle_signals);
      AnomalyDetection anomaly_detection(parts.options.detect_anomaly);
      auto& state = parts.state;
      auto& callbacks = parts.callbacks.list();
      // profiler: set up for "fit", its report written when fit ends (Lightning's profiler.describe in _teardown)
      ProfiledStage profiled(state.profiler_, "fit", state.world_size > 1 ? std::optional<int>(state.global_rank) : std::nullopt,
                             state.log_dir());
      call_and_handle_interrupt(parts.strategy, callbacks, state, parts.logger, [&](bool& finished) {
        callbacks.template run<Hook::setup>(state);
        log_hyperparams(parts, *module);
        call_hook<Hook::on_fit_start>(*module, parts.context, callbacks, state);
        if constexpr (has_val_data) {
          if (state.has_validation && parts.options.num_sanity_val_steps != 0) {
            epoch_loop.val_loop.sanity_check(parts, *module, val_data);
          }
        }
        // Loader factories are asked here, as Lightning's fit_loop.setup_data and on_run_start do.
        if constexpr (from_factory<TrainData>) setup_train_data(parts, train_data, val_data);
        if constexpr (from_factory<ValData>) {
          if (!loader_source(val_data).loaded() && epoch_loop.validates_in_epoch(parts.options, state)) {
            epoch_loop.val_loop.setup_data(parts, val_data);
          }
        }
        parts.logger.metrics().restore_callback_metrics(std::exchange(parts.checkpoint.restored_metrics, {}));
        call_hook<Hook::on_train_start>(*module, parts.context, callbacks, state);
        epoch_loop.interrupted = interrupt_signal != 0;  // a signal before the first batch (a data module's setup)
        if (epoch_loop.interrupted) return end_interrupted(parts, *module);
        while (!done(parts)) {
          advance(parts, *module, train_data, val_data);
          if (epoch_loop.interrupted) {
            end_interrupted(parts, *module);
            return;
          }
        }
        call_hook<Hook::on_train_end>(*module, parts.context, callbacks, state);
        call_hook<Hook::on_fit_end>(*module, parts.context, callbacks, state);
        finished = true;
        log::info_rank_zero("`Trainer.fit` stopped: " + stop_reason_ + ".");
        parts.logger.finalize("success");
        if (data_.teardown) data_.teardown();
        callbacks.template run<Hook::teardown>(state);
      });
    }
  }

  /// Writes a checkpoint of `module` and the training state (global rank zero only); the device-side
  /// optimizer state of a captured step is handed back first.
  template <class Parts>
  void write_checkpoint(Parts& parts, torch::nn::Module& module, const std::filesystem::path& path, bool weights_only) {
    epoch_loop.step.graph().sync_optimizer_state();  // a captured step counts Adam's steps on the device
    std::optional<ProfileScope> profiled;  // profiler: Lightning's "save_checkpoint" action
    if (parts.state.profiler_) [[unlikely]] profiled.emplace(parts.state.profiler_, "save_checkpoint");
    parts.checkpoint.dump(checkpoint_parts(parts, module), path, weights_only);
  }

 private:
  template <class Parts>
  static CheckpointParts checkpoint_parts(Parts& parts, torch::nn::Module& module) {
    return {module, parts.optimization, parts.callbacks, parts.state,
            [&parts](torch::serialize::OutputArchive& archive) { parts.precision.save(archive); },
            [&parts](torch::serialize::InputArchive& archive) { parts.precision.load(archive); },
            Parts::precision_type::name, parts.channels_last};
  }

  /// Lightning's fit setup: the state, max_epochs' default, the optimizers, the checkpoint function callbacks
  /// call, the data sizes and their checks, the resume point, the CUDA graph.
  template <class Parts, class M, class TrainData, class ValData>
  void setup(Parts& parts, const std::shared_ptr<M>& module_pointer, TrainData& train_data, ValData& val_data,
             bool has_val_data, const std::filesystem::path& ckpt_path) {
    const auto& options = parts.options;
    auto& state = parts.state;
    M& module = *module_pointer;
    parts.prepare_module(module);
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

    constexpr bool automatic = uses_automatic_optimization<M>();
    parts.optimization.configure(configure_optimizers(module), automatic, &state);
    parts.context.manual_driver_.reset();
    if constexpr (!automatic) ManualOptimization::setup(parts, module);
    state.optimizers = parts.optimization.optimizers();
    state.optimization_ = &parts.optimization;
    if constexpr (automatic) {
      state.forward_training_epoch = [this, &parts, &module, &train_data] {
        forward_training_epoch(parts, module, train_data, epoch_loop.limit);
      };
    }
    state.decide_across_ranks = [&parts](bool value) { return parts.strategy.reduce_boolean_decision(value, false); };
    // Holds the module: trainer.save_checkpoint works after fit() returned.
    state.save_checkpoint = [this, &parts, module_pointer](const std::filesystem::path& path, bool weights_only) {
      parts.state.last_checkpoint_saved = false;
      try {
        write_checkpoint(parts, *module_pointer, path, weights_only);
        parts.state.last_checkpoint_saved = true;
      } catch (const CheckpointError& error) {
        if (parts.state.stage == Stage::none || parts.options.on_checkpoint_failure == CheckpointFailure::raise) throw;
        log::warn_rank_zero(std::string(error.what()) + "; training continues (on_checkpoint_failure=warn).");
      }
    };

    epoch_loop.reset();
    if constexpr (!from_factory<TrainData>) setup_train_data(parts, train_data, val_data);

    parts.checkpoint.reset();
    parts.checkpoint.extra_states = std::move(data_.states);
    if (!ckpt_path.empty()) {
      parts.checkpoint.restore(checkpoint_parts(parts, module), ckpt_path, parts.root_device());
      parts.apply_memory_format(module);  // the checkpoint holds contiguous weights
    }
    if constexpr (automatic) {
      epoch_loop.step.template setup<M>(parts);
    } else {
      epoch_loop.step.graph().reset();  // ManualOptimization::setup warned if cuda_graphs was asked for
    }
  }

  /// The training data's sizes and their checks (Lightning's fit_loop.setup_data); a loader factory is asked
  /// for its loader first when one is due (reload_dataloaders_every_n_epochs).
  template <class Parts, class TrainData, class ValData>
  void setup_train_data(Parts& parts, TrainData& train_data, ValData& val_data) {
    const auto& options = parts.options;
    auto& state = parts.state;
    if constexpr (from_factory<TrainData>) {
      auto& source = loader_source(train_data);
      if (!reload_due(source, options.reload_dataloaders_every_n_epochs, state.current_epoch)) return;
      source.load(state.current_epoch);
      source.count_load(true);
    }
    const auto train_size = size_of(train_data);
    const auto train_limit = batch_limit(options, options.limit_train_batches, train_size, "limit_train_batches");
    epoch_loop.limit = train_limit;
    // Known when the data has a size (or fast_dev_run fixes it); otherwise learned in the first epoch.
    state.num_training_batches = train_size || options.fast_dev_run > 0 ? train_limit : std::optional<std::int64_t>{};
    std::optional<std::int64_t> val_size;
    if constexpr (from_factory<ValData>) {
      if (loader_source(val_data).loaded()) val_size = size_of(val_data);
    } else if constexpr (!std::is_same_v<std::remove_cvref_t<ValData>, NoData>) {
      val_size = size_of(val_data);
    }
    check_data_sizes(options, state, train_size, val_size);
  }

  template <class Parts, class M>
  void log_hyperparams(Parts& parts, M& module) {
    std::map<std::string, std::string> params;
    if constexpr (requires { module.hparams(); }) params = module.hparams();
    if (data_.hparams) data_.hparams(params);
    parts.checkpoint.hparams = params;  // the checkpoints' hyper_parameters, as Lightning keeps self.hparams
    if (!parts.state.is_global_zero || parts.logger.loggers().empty()) return;
    params["accelerator"] = std::string(to_string(parts.selection.accelerator));
    params["precision"] = std::string(Parts::precision_type::name);
    params["strategy"] = std::string(Parts::strategy_type::name);
    parts.logger.log_hyperparams(params);
  }

  /// Whether the fit is over, with the reason in stop_reason().
  template <class Parts>
  bool done(Parts& parts) {
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

  /// One epoch.
  template <class Parts, class M, class TrainData, class ValData>
  void advance(Parts& parts, M& module, TrainData& train_data, ValData& val_data) {
    auto& state = parts.state;
    auto& checkpoint = parts.checkpoint;
    state.phase_ = MetricPhase::train;
    module.train();
    const bool resuming_mid_epoch = checkpoint.resume.batches_done > 0;
    if constexpr (from_factory<TrainData>) setup_train_data(parts, train_data, val_data);
    if (resuming_mid_epoch) {
      set_cpu_rng_state(checkpoint.resume.epoch_start_rng);
    } else {
      call_hook<Hook::on_train_epoch_start>(module, parts.context, parts.callbacks.list(), state);
    }
    checkpoint.epoch_start_rng = cpu_rng_state();
    std::optional<ProfileScope> profiled;  // profiler: the epoch's batches are the action "run_training_epoch"
    if (state.profiler_) [[unlikely]] profiled.emplace(state.profiler_, "run_training_epoch");
    const std::int64_t batches_done = epoch_loop.run(parts, module, train_data, val_data);
    profiled.reset();
    if (epoch_loop.interrupted) return;
    end_epoch(parts, module, batches_done);
  }

  /// The end of an epoch (Lightning's on_advance_end).
  template <class Parts, class M>
  void end_epoch(Parts& parts, M& module, std::int64_t batches_done) {
    auto& state = parts.state;
    parts.checkpoint.resume_point = {state.current_epoch, batches_done, true};
    auto& metrics = parts.logger.metrics();
    std::map<std::string, double> values;
    {
      // Lightning's order: the callbacks other than the monitoring ones, the model, then the monitoring ones
      // (checkpointing, early stopping), which see the epoch's values. Values logged in any of these hooks are
      // epoch values of this epoch and reach the loggers in its row.
      EpochHookScope scope(&metrics, hook_name(Hook::on_train_epoch_end));
      parts.callbacks.run_train_epoch_end(state, /*monitoring=*/false);
      ModelHook<Hook::on_train_epoch_end>::call(module, parts.context);
      values = metrics.end_epoch(MetricPhase::train, parts.ranks_reducer());
      parts.callbacks.run_train_epoch_end(state, /*monitoring=*/true);
      if (metrics.has_epoch_values(MetricPhase::train)) {
        for (auto& [key, value] : metrics.end_epoch(MetricPhase::train, parts.ranks_reducer())) values[key] = value;
      }
    }
    parts.log_metrics(values, std::max<std::int64_t>(0, state.global_step - 1));
    parts.optimization.step_schedulers(SchedulerInterval::epoch, state.current_epoch + 1);
    ++state.current_epoch;
    parts.checkpoint.resume_point = {state.current_epoch, 0, false};
    parts.agree_on_stop();
  }

  /// After a SIGINT/SIGTERM between two batches: checkpoint, on_exception, loggers, teardown (Lightning's
  /// KeyboardInterrupt handling); then fit() returns.
  template <class Parts>
  void end_interrupted(Parts& parts, torch::nn::Module& module) {
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

  std::string stop_reason_{};
  DataHooks data_{};
};

}  // namespace volt::detail

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/trainer/loops/impl/fit_loop.ipp>
#endif

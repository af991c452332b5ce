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
  FitLoop();
  ~FitLoop();
  FitLoop(const FitLoop&) = delete;
  FitLoop& operator=(const FitLoop&) = delete;

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
        end_succeeded(parts);
      });
    }
  }

  /// Writes a checkpoint of `module` and the training state (global rank zero only); the device-side
  /// optimizer state of a captured step is handed back first.
  template <class Parts>
  void write_checkpoint(Parts& parts, torch::nn::Module& module, const std::filesystem::path& path, bool weights_only);

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
    auto& state = parts.state;
    M& module = *module_pointer;
    parts.prepare_module(module);
    reset_state(parts, has_val_data);

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
    set_state_functions(parts, module_pointer);

    epoch_loop.reset();
    if constexpr (!from_factory<TrainData>) setup_train_data(parts, train_data, val_data);

    restore(parts, module, ckpt_path);
    if constexpr (automatic) {
      epoch_loop.step.template setup<M>(parts);
    } else {
      epoch_loop.step.graph().reset();  // ManualOptimization::setup warned if cuda_graphs was asked for
    }
  }

  /// The part of setup that depends on neither the model nor the data: the state a fit starts from.
  template <class Parts>
  void reset_state(Parts& parts, bool has_val_data);
  /// The state's functions that callbacks call: save_checkpoint (it holds the module, so that
  /// trainer.save_checkpoint works after fit() returned) and decide_across_ranks.
  template <class Parts>
  void set_state_functions(Parts& parts, std::shared_ptr<torch::nn::Module> module);
  /// Clears the checkpoint connector for this fit and resumes from `ckpt_path` when it is not empty.
  template <class Parts>
  void restore(Parts& parts, torch::nn::Module& module, const std::filesystem::path& ckpt_path);

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

  /// After on_fit_end of a fit that succeeded: the stop reason, the loggers' "success", the data module's
  /// teardown, the callbacks' teardown.
  template <class Parts>
  void end_succeeded(Parts& parts);

  /// Whether the fit is over, with the reason in stop_reason().
  template <class Parts>
  bool done(Parts& parts);

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
    std::map<std::string, double> values;
    {
      // Lightning's order: the callbacks other than the monitoring ones, the model, then the monitoring ones
      // (checkpointing, early stopping), which see the epoch's values. Values logged in any of these hooks are
      // epoch values of this epoch and reach the loggers in its row.
      EpochHookScope scope(&parts.logger.metrics(), hook_name(Hook::on_train_epoch_end));
      parts.callbacks.run_train_epoch_end(state, /*monitoring=*/false);
      ModelHook<Hook::on_train_epoch_end>::call(module, parts.context);
      values = end_epoch_values(parts);
    }
    close_epoch(parts, values);
  }
  /// After the model's on_train_epoch_end: the epoch's values, the monitoring callbacks' hook, and what they
  /// logged.
  template <class Parts>
  std::map<std::string, double> end_epoch_values(Parts& parts);
  /// The epoch's row for the loggers, epoch-interval schedulers, the next resume point, and the ranks'
  /// agreement on stopping.
  template <class Parts>
  void close_epoch(Parts& parts, const std::map<std::string, double>& values);

  /// After a SIGINT/SIGTERM between two batches: checkpoint, on_exception, loggers, teardown (Lightning's
  /// KeyboardInterrupt handling); then fit() returns.
  template <class Parts>
  void end_interrupted(Parts& parts, torch::nn::Module& module);

  std::string stop_reason_{};
  DataHooks data_{};
};

}  // namespace volt::detail

#include <volt/trainer/loops/impl/fit_loop.tpp>
#if VOLT_DETAIL_HEADER_BODIES
#include <volt/trainer/loops/impl/fit_loop.ipp>
#endif

/// \file
/// volt::Trainer: Lightning's Trainer for LibTorch, with accelerator, strategy and precision as template arguments.
///
/// ```
/// volt::Trainer<volt::Auto, volt::SingleDevice, volt::BF16Autocast> trainer(
///     {.max_epochs = 5}, volt::ModelCheckpoint{{.monitor = "val_acc", .mode = "max"}});
/// trainer.fit(model, train_loader, val_loader);
/// ```
///
/// This class only wires the parts (as Lightning's trainer.py does): the connectors in trainer/connectors/
/// set up devices, callbacks, loggers, data limits, checkpoints and signals; the loops in trainer/loops/ run
/// fit (fit_loop.hpp -> training_epoch_loop.hpp -> cuda_graph_step.hpp -> automatic_optimization.hpp, with
/// evaluation_loop.hpp for validation), validate and test (evaluation_loop.hpp) and predict
/// (prediction_loop.hpp); trainer/call.hpp calls the hooks of the table in callbacks/hooks.hpp.
/// docs/architecture.md draws the whole picture.
#pragma once

#include <volt/accelerators.hpp>
#include <volt/callbacks.hpp>
#include <volt/core/errors.hpp>
#include <volt/loggers.hpp>
#include <volt/precision.hpp>
#include <volt/strategies.hpp>
#include <volt/serialization/checkpoint_io.hpp>
#include <volt/trainer/connectors/accelerator_connector.hpp>
#include <volt/trainer/connectors/data_connector.hpp>
#include <volt/trainer/connectors/signal_connector.hpp>
#include <volt/trainer/instantiations.hpp>
#include <volt/trainer/datamodule.hpp>
#include <volt/trainer/loops/evaluation_loop.hpp>
#include <volt/trainer/loops/fit_loop.hpp>
#include <volt/trainer/loops/prediction_loop.hpp>
#include <volt/trainer/module.hpp>
#include <volt/trainer/options.hpp>
#include <volt/trainer/parts.hpp>
#include <volt/trainer/state.hpp>
#include <volt/trainer/step_context.hpp>

#include <torch/torch.h>

#include <concepts>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace volt {

/// Lightning's Trainer (see the file comment): runs fit, validate, test and predict for a model that meets
/// the contract of volt/trainer/module.hpp. `Accelerator` (Auto, CPU, CUDA, MPS), `Strategy` (SingleDevice,
/// DDP) and `Precision` (FP32, FP64, FP16True, BF16True, FP16Autocast, BF16Autocast) are policy types;
/// combinations that cannot work fail to compile with a message naming the rule. Under DDP every process
/// constructs its own Trainer and calls the same methods in the same order. Not thread-safe.
template <AcceleratorChoice Accelerator = Auto, StrategyPolicy Strategy = SingleDevice, PrecisionPolicy Precision = FP32>
class Trainer {
  static_assert((check_strategy_supported<Accelerator, Strategy>(), true));
  static_assert((check_precision_supported<Accelerator, Precision>(), true));
  static_assert(strategy_implemented_v<Strategy>,
                "volt: the Trainer runs volt::SingleDevice and volt::DDP; this strategy has no implementation "
                "(volt::strategy_implemented_v<Strategy> is false)");

 public:
  /// The Accelerator policy this Trainer was instantiated with.
  using accelerator_type = Accelerator;
  /// The Strategy policy.
  using strategy_type = Strategy;
  /// The Precision policy.
  using precision_type = Precision;

  /// Validates the options, seeds (TrainerOptions::seed), sets the deterministic mode, selects the devices
  /// (Lightning's connector) and prints the device lines on rank zero. `extras` are callbacks (any type with
  /// Trainer hooks), loggers (types derived from volt::Logger, or std::shared_ptr to them) and optionally a
  /// configured Precision object (e.g. `volt::FP16Autocast({.init_scale = 1024})`), in any order. Under DDP
  /// it reads the cluster environment (rank, world size) but neither starts processes nor joins the process
  /// group: fit(), validate() and test() do. Throws MisconfigurationError for invalid options, unavailable
  /// devices, more than one device with SingleDevice, or conflicting default callbacks (e.g.
  /// enable_progress_bar=false with a ProgressBar given); under DDP also what detect_cluster_environment
  /// throws.
  template <class... Extras>
  explicit Trainer(TrainerOptions options = {}, Extras&&... extras) : parts_(std::move(options)) {
    parts_.template set_up<Accelerator>(std::forward<Extras>(extras)...);
  }

  // ---- accessors ---------------------------------------------------------------------------------

  /// The device the model trains on.
  torch::Device root_device() const { return parts_.strategy.root_device(); }
  /// This process's rank among all processes of the run (0 without DDP).
  int global_rank() const { return parts_.strategy.global_rank(); }
  /// This process's rank on its node (its index into device_ids()).
  int local_rank() const { return parts_.strategy.local_rank(); }
  /// The index of this process's node (0 without DDP or with one node).
  int node_rank() const { return parts_.strategy.node_rank(); }
  /// Number of processes of the run: devices x num_nodes with DDP, 1 without.
  int world_size() const { return parts_.strategy.world_size(); }
  /// Whether this process is global rank 0, the one that writes checkpoints and logs.
  bool is_global_zero() const { return parts_.strategy.is_global_zero(); }
  /// The strategy's run-time side: collectives (barrier, all_reduce, broadcast, all_gather,
  /// reduce_boolean_decision) that every rank must call in the same order.
  detail::StrategyRuntime<Strategy>& strategy() { return parts_.strategy; }
  /// Lightning's trainer.device_ids.
  const std::vector<int>& device_ids() const { return parts_.selection.device_ids; }
  /// Lightning's trainer.num_devices: the devices selected on each node.
  std::int64_t num_devices() const { return static_cast<std::int64_t>(parts_.selection.device_ids.size()); }
  /// The accelerator in use (Auto resolved at construction).
  AcceleratorKind accelerator() const { return parts_.selection.accelerator; }
  /// Optimizer steps taken in the current or last fit (skipped AMP steps included).
  std::int64_t global_step() const { return parts_.state.global_step; }
  /// The epoch being trained, counted from 0 (it advances as each training epoch ends).
  std::int64_t current_epoch() const { return parts_.state.current_epoch; }
  /// Whether a stop was requested (a callback hook returning true, EarlyStopping, or state().should_stop);
  /// under DDP the ranks agree on it (any rank's request stops them all) after validation and at epoch end.
  bool should_stop() const { return parts_.state.should_stop; }
  /// The options as validated at construction (fast_dev_run already applied to max_steps, max_epochs and
  /// num_sanity_val_steps).
  const TrainerOptions& options() const { return parts_.options; }
  /// The state callbacks and model hooks see; writable (e.g. `state().should_stop = true`).
  TrainerState& state() { return parts_.state; }
  /// All logged metrics as numbers (Lightning's trainer.callback_metrics).
  std::map<std::string, double, std::less<>> callback_metrics() { return parts_.logger.metrics().callback_metrics(); }
  /// The first callback of type C, or nullptr (e.g. trainer.callback<volt::ModelCheckpoint>()).
  template <class C>
  C* callback() {
    return parts_.callbacks.list().template find<C>();
  }
  /// The first ModelCheckpoint callback (Lightning's trainer.checkpoint_callback), or nullptr.
  ModelCheckpoint* checkpoint_callback() { return parts_.callbacks.list().template find<ModelCheckpoint>(); }
  /// The loggers (the default CSVLogger when logger is true and none was given; none with fast_dev_run).
  const std::vector<std::shared_ptr<Logger>>& loggers() const { return parts_.logger.loggers(); }
  /// The precision policy object (e.g. to read the GradScaler of FP16Autocast).
  Precision& precision() { return parts_.precision; }
  /// Why the last fit stopped ("max_epochs=5 reached", "max_steps=100 reached", "stopped by a callback",
  /// "interrupted by SIGINT").
  const std::string& stop_reason() const { return fit_loop_.stop_reason(); }
  /// Whether the last fit() returned early because of SIGINT or SIGTERM (TrainerOptions::handle_signals).
  bool interrupted() const { return fit_loop_.interrupted(); }
  /// Training steps of the last (or running) fit() that were replays of the captured CUDA graph
  /// (TrainerOptions::cuda_graphs); 0 when nothing was captured.
  std::int64_t cuda_graph_replays() const noexcept { return fit_loop_.epoch_loop.step.graph().replays(); }
  /// Training steps of the last fit() that ran eagerly after the capture because their batch had other
  /// shapes than the captured one (a short last batch).
  std::int64_t cuda_graph_eager_steps() const noexcept { return fit_loop_.epoch_loop.step.graph().eager_fallbacks(); }

  // ---- fit ---------------------------------------------------------------------------------------

  /// Trains `model` on `train_data` (any range of batches, or a pointer to one such as the std::unique_ptr
  /// that torch::data::make_data_loader returns; a callable returning one, asked again as
  /// reload_dataloaders_every_n_epochs says; or a volt::DataModule, volt/trainer/datamodule.hpp). Resumes from
  /// `ckpt_path` when given.
  /// Under DDP every rank must call it: the first call starts the other local processes (local rank 0 of a
  /// volt-launched run) and joins the process group, and each rank trains on its share of the data (see
  /// volt/distributed/sampler.hpp); only global rank 0 writes checkpoints and logs.
  /// Throws before training: MisconfigurationError (a fractional limit on data of unknown size, LOCAL_RANK
  /// set without MASTER_PORT), std::invalid_argument (an integer val_check_interval longer than the epoch),
  /// CheckpointError (a `ckpt_path` that is unreadable, weights-only or of another model), DistributedError
  /// (peers that do not join within the timeout).
  /// Errors: an exception from training_step, a data loader or a callback reaches the caller with the epoch
  /// and batch index added to its message (see detail::rethrow_with_context), after on_exception and
  /// teardown ran. SIGINT/SIGTERM (TrainerOptions::handle_signals): the current batch finishes,
  /// `<checkpoint dir>/interrupted.ckpt` is written when checkpointing is on, on_exception (with
  /// volt::TrainingInterrupted) and teardown run, and fit() *returns* with interrupted() true; the previous
  /// signal handlers are restored on every exit path. Under DDP a rank that fails leaves a note naming
  /// itself and drops its process group, so the other ranks' next collective throws DistributedError naming
  /// it. With error_on_nonfinite_loss, a NaN or infinite loss throws std::runtime_error.
  template <class Model, class TrainData>
  void fit(Model& model, TrainData&& train_data, const std::filesystem::path& ckpt_path = {}) {
    detail::NoData none;
    detail::run_fit(parts_, fit_loop_, model, train_data, none, ckpt_path);
  }

  /// fit() with validation on `val_data` (every val_check_interval and check_val_every_n_epoch, after a
  /// sanity check of num_sanity_val_steps batches). The model needs a validation_step for its batch type
  /// (checked at compile time). Under DDP `val_data` is split across ranks like `train_data`.
  template <class Model, class TrainData, class ValData>
    requires(!std::convertible_to<ValData, std::filesystem::path>)
  void fit(Model& model, TrainData&& train_data, ValData&& val_data, const std::filesystem::path& ckpt_path = {}) {
    detail::run_fit(parts_, fit_loop_, model, train_data, val_data, ckpt_path);
  }

  /// Runs validation_step over `data` (at most limit_val_batches batches; a volt::DataModule: its
  /// val_dataloader) and returns the epoch metrics
  /// (Lightning's trainer.validate). Under DDP every rank must call it (it joins the process group as fit()
  /// does): each rank evaluates its share of `data`, the epoch values are combined across ranks and every
  /// rank returns them; rank 0 sends them to the loggers. Throws MisconfigurationError ("No
  /// `validation_step()` method defined to run `Trainer.validate`.") when the model has none for the batch
  /// type, and an exception from validation_step with the batch index added.
  template <class Model, class Data>
  std::map<std::string, double> validate(Model& model, Data&& data) {
    return detail::run_evaluation<Stage::validating>(parts_, evaluation_loop_, model, data);
  }

  /// Runs test_step over `data` (at most limit_test_batches batches; a volt::DataModule: its test_dataloader)
  /// and returns the epoch metrics
  /// (Lightning's trainer.test), with validate()'s rank contract. Throws MisconfigurationError ("No
  /// `test_step()` method defined to run `Trainer.test`.") when the model has none for the batch type, and
  /// an exception from test_step with the batch index added.
  template <class Model, class Data>
  std::map<std::string, double> test(Model& model, Data&& data) {
    return detail::run_evaluation<Stage::testing>(parts_, evaluation_loop_, model, data);
  }

  /// Runs predict_step over `data` (a volt::DataModule: its predict_dataloader; at most limit_predict_batches
  /// batches, under inference mode and the precision's forward context) and returns its results in order
  /// (Lightning's trainer.predict). The
  /// model needs a predict_step for the batch type (checked at compile time). It does not split `data`
  /// across ranks and runs no collective of its own; under DDP it joins the process group as fit() does
  /// (when no earlier call has) and the model setup broadcasts rank 0's weights, so every rank must call it.
  template <class Model, class Data>
  auto predict(Model& model, Data&& data) {
    return detail::run_predict(parts_, model, data);
  }

  /// Writes a checkpoint of the model passed to the last fit (Lightning's trainer.save_checkpoint): the
  /// full training state, or the weights only. Only global rank 0 writes. Under DDP it is a collective,
  /// as Lightning's (a barrier follows the write): every rank must call it, and every rank returns once the
  /// file is complete, so any rank may read it next. Throws c10::Error when fit() was never called,
  /// CheckpointError naming the file when the write fails (the previous file at `path` is kept): under DDP
  /// on every rank (rank 0 its own error, the others one saying rank 0 failed), none left waiting.
  void save_checkpoint(const std::filesystem::path& path, bool weights_only = false) {
    TORCH_CHECK(parts_.state.save_checkpoint, "volt: save_checkpoint needs a model: call fit() first");
    // The barrier and the failure news in one collective (a single process needs neither).
    parts_.strategy.run_and_agree([&] { parts_.state.save_checkpoint(path, weights_only); }, [&] {
      return CheckpointError("volt: rank 0 could not write the checkpoint " + path.string() +
                             " (its error is in rank 0's output)");
    });
  }


 private:
  detail::TrainerParts<Strategy, Precision> parts_;
  detail::FitLoop fit_loop_{};
  detail::EvaluationLoop evaluation_loop_{};
};

}  // namespace volt

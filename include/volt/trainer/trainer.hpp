/// \file
/// volt::Trainer: Lightning's Trainer for LibTorch, with accelerator, strategy and precision as template arguments.
///
/// ```
/// volt::Trainer<volt::Auto, volt::SingleDevice, volt::BF16Autocast> trainer(
///     {.max_epochs = 5}, volt::ModelCheckpoint{{.monitor = "val_acc", .mode = "max"}});
/// trainer.fit(model, train_loader, val_loader);
/// ```
///
/// The training loop follows Lightning's order of operations (spec section 7): per batch, convert and move
/// the batch, training_step under the precision's forward context, loss / accumulate_grad_batches,
/// zero_grad at the start of an accumulation window, (scaled) backward, and at the end of the window (or of
/// the epoch) unscale -> on_before_optimizer_step -> clip -> step (skipped on inf under fp16) -> update,
/// global_step + 1, step-interval LR schedulers. Validation runs on val_check_interval's batches and at the
/// end of the epoch, before on_train_epoch_end; epoch-interval schedulers step after it.
#pragma once

#include <volt/accelerators.hpp>
#include <volt/callbacks.hpp>
#include <volt/core/errors.hpp>
#include <volt/core/log.hpp>
#include <volt/core/range.hpp>
#include <volt/distributed.hpp>
#include <volt/loggers.hpp>
#include <volt/precision.hpp>
#include <volt/strategies.hpp>
#include <volt/trainer/checkpoint_io.hpp>
#include <volt/trainer/cuda_graph.hpp>
#include <volt/trainer/metrics.hpp>
#include <volt/trainer/module.hpp>
#include <volt/trainer/options.hpp>
#include <volt/trainer/step_context.hpp>
#include <volt/transfer.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <ranges>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#if !defined(_WIN32)
#include <signal.h>
#endif

namespace volt {

namespace detail {

template <class T>
concept logger_pointer = requires { typename T::element_type; } && std::derived_from<typename T::element_type, Logger>;

/// Rounds a fraction-of-epoch interval to batches as Lightning does.
inline std::int64_t batches_for(const BatchAmount& amount, std::int64_t total) {
  if (amount.is_fraction()) return std::max<std::int64_t>(1, static_cast<std::int64_t>(static_cast<double>(total) * amount.fraction()));
  return amount.count();
}

inline torch::Tensor cpu_rng_state() {
  auto generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}
inline void set_cpu_rng_state(const torch::Tensor& state) {
  auto generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
}

/// The signal (SIGINT or SIGTERM) that asked the running fit() to stop, 0 when none did. Set by the
/// handler fit() installs while it runs (TrainerOptions::handle_signals); read between training batches.
inline volatile std::sig_atomic_t interrupt_signal = 0;

/// While alive, SIGINT and SIGTERM set interrupt_signal instead of ending the process; the destructor
/// restores the previous handlers. The handler resets itself on delivery (SA_RESETHAND), so a second
/// signal during the graceful shutdown ends the process the default way.
class ScopedInterruptHandler {
 public:
  explicit ScopedInterruptHandler(bool enabled) : enabled_(enabled) {
    interrupt_signal = 0;
    if (!enabled_) return;
#if !defined(_WIN32)
    struct sigaction action {};
    action.sa_handler = [](int signal) { interrupt_signal = signal; };
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESETHAND;
    sigaction(SIGINT, &action, &previous_int_);
    sigaction(SIGTERM, &action, &previous_term_);
#else
    previous_int_ = std::signal(SIGINT, [](int signal) { interrupt_signal = signal; });
    previous_term_ = std::signal(SIGTERM, [](int signal) { interrupt_signal = signal; });
#endif
  }
  ScopedInterruptHandler(const ScopedInterruptHandler&) = delete;
  ScopedInterruptHandler& operator=(const ScopedInterruptHandler&) = delete;
  ~ScopedInterruptHandler() {
    if (!enabled_) return;
#if !defined(_WIN32)
    sigaction(SIGINT, &previous_int_, nullptr);
    sigaction(SIGTERM, &previous_term_, nullptr);
#else
    std::signal(SIGINT, previous_int_);
    std::signal(SIGTERM, previous_term_);
#endif
  }

 private:
  bool enabled_;
#if !defined(_WIN32)
  struct sigaction previous_int_ {};
  struct sigaction previous_term_ {};
#else
  void (*previous_int_)(int) = nullptr;
  void (*previous_term_)(int) = nullptr;
#endif
};

/// Rethrows the exception in flight with `where` (e.g. "epoch 2, batch 17") added to its message. c10::Error
/// gets it as context and keeps its type; the standard exception types and volt's errors are rethrown as the
/// same type (std::rethrow_if_nested gives back the original object); anything else is rethrown unchanged.
[[noreturn]] inline void rethrow_with_context(const std::string& where) {
  const auto message = [&](const std::exception& error) {
    return std::string(error.what()) + "\n(volt: raised during " + where + ")";
  };
  try {
    throw;
  } catch (c10::Error& error) {
    error.add_context("volt: raised during " + where);
    throw;
  } catch (const MisconfigurationError& error) {
    std::throw_with_nested(MisconfigurationError(message(error)));
  } catch (const CheckpointError& error) {
    std::throw_with_nested(CheckpointError(message(error)));
  } catch (const std::invalid_argument& error) {
    std::throw_with_nested(std::invalid_argument(message(error)));
  } catch (const std::out_of_range& error) {
    std::throw_with_nested(std::out_of_range(message(error)));
  } catch (const std::logic_error& error) {
    std::throw_with_nested(std::logic_error(message(error)));
  } catch (const std::overflow_error& error) {
    std::throw_with_nested(std::overflow_error(message(error)));
  } catch (const std::runtime_error& error) {
    std::throw_with_nested(std::runtime_error(message(error)));
  } catch (const std::exception& error) {
    std::throw_with_nested(std::runtime_error(message(error)));
  }
}

}  // namespace detail

/// What on_exception callbacks receive when SIGINT or SIGTERM stopped fit() (Lightning's KeyboardInterrupt).
/// fit() itself does not throw it: it returns, with trainer.interrupted() true.
class TrainingInterrupted : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Lightning's Trainer (see the file comment): runs fit, validate, test and predict for a model that meets
/// the contract of volt/trainer/module.hpp. `Accelerator` (Auto, CPU, CUDA, MPS), `Strategy` (SingleDevice,
/// DDP) and `Precision` (FP32, FP64, FP16True, BF16True, FP16Autocast, BF16Autocast) are policy types;
/// combinations that cannot work fail to compile with a message naming the rule. Under DDP every process
/// constructs its own Trainer and calls the same methods in the same order. Not thread-safe.
template <class Accelerator = Auto, class Strategy = SingleDevice, class Precision = FP32>
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
  explicit Trainer(TrainerOptions options = {}, Extras&&... extras) : options_(std::move(options)) {
    detail::validate(options_);
    if (options_.fast_dev_run > 0) {
      options_.max_steps = options_.fast_dev_run;
      options_.max_epochs = 1;
      options_.num_sanity_val_steps = 0;
    }
    if (options_.seed) torch::manual_seed(*options_.seed);
    if (options_.deterministic) {
      at::globalContext().setDeterministicAlgorithms(*options_.deterministic, false);
      if (*options_.deterministic) {
        at::globalContext().setDeterministicCuDNN(true);
        at::globalContext().setBenchmarkCuDNN(false);
      }
    }
    // "auto" means every device of the accelerator; a single-device strategy takes the first of them.
    const DeviceSpec devices = !Strategy::is_distributed && options_.devices.is_auto() ? DeviceSpec{1} : options_.devices;
    selection_ = select_devices<Accelerator>(devices, Frontend::trainer);
    if (!Strategy::is_distributed && selection_.parallel_devices.size() != 1) {
      std::string ids;
      for (int id : selection_.device_ids) ids += (ids.empty() ? "" : ", ") + std::to_string(id);
      throw MisconfigurationError("volt::SingleDevice trains on exactly one device, but the device spec selected " +
                                  std::to_string(selection_.parallel_devices.size()) + " " +
                                  std::string(to_string(selection_.accelerator)) + " devices: [" + ids +
                                  "]. Pass {.devices = 1} (or a single id such as volt::devices({1})), or "
                                  "train with volt::DDP.");
    }
    check_strategy_supported_on_machine<Accelerator, Strategy>();
    strategy_.configure(selection_, options_.num_nodes);
    state_.global_rank = strategy_.global_rank();
    state_.world_size = strategy_.world_size();
    state_.is_global_zero = strategy_.is_global_zero();
    log_device_info(selection_.accelerator);
    (add_extra(std::forward<Extras>(extras)), ...);
    // As Lightning's _reorder_callbacks: checkpoint callbacks run after the others, so a checkpoint written in
    // a hook holds the other callbacks' state after that hook (exact resume).
    for (auto& checkpoint : deferred_checkpoints_) callbacks_.add(std::move(checkpoint));
    deferred_checkpoints_.clear();
    precision_.setup(root_device());
    add_default_callbacks();
    if (options_.logger && options_.fast_dev_run == 0 && loggers_.empty()) {
      auto csv = std::make_shared<CSVLogger>();
      csv->set_default_save_dir(options_.default_root_dir);
      loggers_.push_back(std::move(csv));
    }
    if (!options_.logger || options_.fast_dev_run > 0) loggers_.clear();
  }

  // ---- accessors ---------------------------------------------------------------------------------

  /// The device the model trains on.
  torch::Device root_device() const { return strategy_.root_device(); }
  /// This process's rank among all processes of the run (0 without DDP).
  int global_rank() const { return strategy_.global_rank(); }
  /// This process's rank on its node (its index into device_ids()).
  int local_rank() const { return strategy_.local_rank(); }
  /// The index of this process's node (0 without DDP or with one node).
  int node_rank() const { return strategy_.node_rank(); }
  /// Number of processes of the run: devices x num_nodes with DDP, 1 without.
  int world_size() const { return strategy_.world_size(); }
  /// Whether this process is global rank 0, the one that writes checkpoints and logs.
  bool is_global_zero() const { return strategy_.is_global_zero(); }
  /// The strategy's run-time side: collectives (barrier, all_reduce, broadcast, all_gather,
  /// reduce_boolean_decision) that every rank must call in the same order.
  detail::StrategyRuntime<Strategy>& strategy() { return strategy_; }
  /// Lightning's trainer.device_ids.
  const std::vector<int>& device_ids() const { return selection_.device_ids; }
  /// Lightning's trainer.num_devices: the devices selected on each node.
  std::int64_t num_devices() const { return static_cast<std::int64_t>(selection_.device_ids.size()); }
  /// The accelerator in use (Auto resolved at construction).
  AcceleratorKind accelerator() const { return selection_.accelerator; }
  /// Optimizer steps taken in the current or last fit (skipped AMP steps included).
  std::int64_t global_step() const { return state_.global_step; }
  /// The epoch being trained, counted from 0 (it advances as each training epoch ends).
  std::int64_t current_epoch() const { return state_.current_epoch; }
  /// Whether a stop was requested (a callback hook returning true, EarlyStopping, or state().should_stop);
  /// under DDP the ranks agree on it (any rank's request stops them all) after validation and at epoch end.
  bool should_stop() const { return state_.should_stop; }
  /// The options as validated at construction (fast_dev_run already applied to max_steps, max_epochs and
  /// num_sanity_val_steps).
  const TrainerOptions& options() const { return options_; }
  /// The state callbacks and model hooks see; writable (e.g. `state().should_stop = true`).
  TrainerState& state() { return state_; }
  /// All logged metrics as numbers (Lightning's trainer.callback_metrics).
  std::map<std::string, double, std::less<>> callback_metrics() { return metrics_.callback_metrics(); }
  /// The first callback of type C, or nullptr (e.g. trainer.callback<volt::ModelCheckpoint>()).
  template <class C>
  C* callback() {
    return callbacks_.find<C>();
  }
  /// The first ModelCheckpoint callback (Lightning's trainer.checkpoint_callback), or nullptr.
  ModelCheckpoint* checkpoint_callback() { return callbacks_.find<ModelCheckpoint>(); }
  /// The loggers (the default CSVLogger when logger is true and none was given; none with fast_dev_run).
  const std::vector<std::shared_ptr<Logger>>& loggers() const { return loggers_; }
  /// The precision policy object (e.g. to read the GradScaler of FP16Autocast).
  Precision& precision() { return precision_; }
  /// Why the last fit stopped ("max_epochs=5 reached", "max_steps=100 reached", "stopped by a callback",
  /// "interrupted by SIGINT").
  const std::string& stop_reason() const { return stop_reason_; }
  /// Whether the last fit() returned early because of SIGINT or SIGTERM (TrainerOptions::handle_signals).
  bool interrupted() const { return interrupted_; }
  /// Training steps of the last (or running) fit() that were replays of the captured CUDA graph
  /// (TrainerOptions::cuda_graphs); 0 when nothing was captured.
  std::int64_t cuda_graph_replays() const noexcept { return graph_.replays(); }
  /// Training steps of the last fit() that ran eagerly after the capture because their batch had other
  /// shapes than the captured one (a short last batch).
  std::int64_t cuda_graph_eager_steps() const noexcept { return graph_.eager_fallbacks(); }

  // ---- fit ---------------------------------------------------------------------------------------

  /// Trains `model` on `train_data` (any range of batches, or a pointer to one such as the std::unique_ptr
  /// that torch::data::make_data_loader returns). Resumes from `ckpt_path` when given.
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
    strategy_.setup_environment();
    auto&& train = shard(train_data);
    run_fit(model, train, none, ckpt_path);
  }

  /// fit() with validation on `val_data` (every val_check_interval and check_val_every_n_epoch, after a
  /// sanity check of num_sanity_val_steps batches). The model needs a validation_step for its batch type
  /// (checked at compile time). Under DDP `val_data` is split across ranks like `train_data`.
  template <class Model, class TrainData, class ValData>
    requires(!std::convertible_to<ValData, std::filesystem::path>)
  void fit(Model& model, TrainData&& train_data, ValData&& val_data, const std::filesystem::path& ckpt_path = {}) {
    strategy_.setup_environment();
    auto&& train = shard(train_data);
    auto&& val = shard(val_data);
    run_fit(model, train, val, ckpt_path);
  }

  /// Runs validation_step over `data` (at most limit_val_batches batches) and returns the epoch metrics
  /// (Lightning's trainer.validate). Under DDP every rank must call it (it joins the process group as fit()
  /// does): each rank evaluates its share of `data`, the epoch values are combined across ranks and every
  /// rank returns them; rank 0 sends them to the loggers. Throws MisconfigurationError ("No
  /// `validation_step()` method defined to run `Trainer.validate`.") when the model has none for the batch
  /// type, and an exception from validation_step with the batch index added.
  template <class Model, class Data>
  std::map<std::string, double> validate(Model& model, Data&& data) {
    strategy_.setup_environment();
    auto&& mine = shard(data);
    return run_standalone_evaluation(model, mine, Stage::validating);
  }

  /// Runs test_step over `data` (at most limit_test_batches batches) and returns the epoch metrics
  /// (Lightning's trainer.test), with validate()'s rank contract. Throws MisconfigurationError ("No
  /// `test_step()` method defined to run `Trainer.test`.") when the model has none for the batch type, and
  /// an exception from test_step with the batch index added.
  template <class Model, class Data>
  std::map<std::string, double> test(Model& model, Data&& data) {
    strategy_.setup_environment();
    auto&& mine = shard(data);
    return run_standalone_evaluation(model, mine, Stage::testing);
  }

  /// Runs predict_step over `data` (at most limit_predict_batches batches, under inference mode and the
  /// precision's forward context) and returns its results in order (Lightning's trainer.predict). The
  /// model needs a predict_step for the batch type (checked at compile time). It does not split `data`
  /// across ranks and runs no collective of its own; under DDP it joins the process group as fit() does
  /// (when no earlier call has) and the model setup broadcasts rank 0's weights, so every rank must call it.
  template <class Model, class Data>
  auto predict(Model& model, Data&& data) {
    using M = detail::module_t<Model>;
    using Batch = detail::batch_t<Data>;
    static_assert(detail::has_predict_step<M, Batch>,
                  "volt: trainer.predict needs the model to define `predict_step(batch[, batch_idx])`");
    strategy_.setup_environment();
    auto module = detail::model_module(model);
    prepare_module(*module);
    using Result = std::remove_cvref_t<decltype(detail::call_predict_step(*module, std::declval<Batch&>(),
                                                                          std::int64_t{}, std::declval<StepContext&>()))>;
    std::vector<Result> results;
    state_.stage = Stage::predicting;
    state_.phase_ = MetricPhase::predict;
    module->eval();
    auto&& range = detail::as_range(data);
    const auto limit = batch_limit(options_.limit_predict_batches, detail::size_of(data), "limit_predict_batches");
    std::int64_t batch_idx = 0;
    for (auto&& raw : range) {
      if (limit && batch_idx >= *limit) break;
      auto batch = prepare_batch(std::forward<decltype(raw)>(raw));
      EvalGuard guard(options_.inference_mode);
      auto context = precision_.forward_context();
      results.push_back(detail::call_predict_step(*module, batch, batch_idx, context_));
      ++batch_idx;
    }
    state_.stage = Stage::none;
    return results;
  }

  /// Writes a checkpoint of the model passed to the last fit (Lightning's trainer.save_checkpoint): the
  /// full training state, or the weights only. Only global rank 0 writes. Under DDP it is a collective,
  /// as Lightning's (a barrier follows the write): every rank must call it, and every rank returns once the
  /// file is complete, so any rank may read it next. Throws c10::Error when fit() was never called,
  /// CheckpointError naming the file when the write fails (the previous file at `path` is kept): under DDP
  /// on every rank (rank 0 its own error, the others one saying rank 0 failed), none left waiting.
  void save_checkpoint(const std::filesystem::path& path, bool weights_only = false) {
    TORCH_CHECK(state_.save_checkpoint, "volt: save_checkpoint needs a model: call fit() first");
    std::exception_ptr error;
    try {
      state_.save_checkpoint(path, weights_only);
    } catch (...) {
      error = std::current_exception();
    }
    // The barrier and the failure news in one collective (a single process needs neither).
    const bool any_failed =
        strategy_.world_size() > 1 && strategy_.reduce_boolean_decision(error != nullptr, /*all=*/false);
    if (error) std::rethrow_exception(error);
    if (any_failed) {
      throw CheckpointError("volt: rank 0 could not write the checkpoint " + path.string() +
                            " (its error is in rank 0's output)");
    }
  }

 private:
  /// This rank's share of `data`: the data itself without DDP, or when it is already split (volt::per_rank,
  /// a loader with volt::DistributedSampler); otherwise a view taking this rank's batch of each group of
  /// world_size() batches.
  template <class Data>
  decltype(auto) shard(Data& data) {
    using D = std::remove_cvref_t<Data>;
    if constexpr (!Strategy::is_distributed || detail::is_per_rank<D>::value ||
                  detail::uses_distributed_sampler<D>::value || std::is_same_v<D, detail::NoData>) {
      return (data);
    } else {
      using Range = std::remove_reference_t<decltype(detail::as_range(data))>;
      return detail::RankShard<Range>(detail::as_range(data), strategy_.world_size(), strategy_.global_rank());
    }
  }

  /// Evaluation autograd mode: inference mode (when enabled) and no grad. InferenceMode(false) turns grad
  /// mode on, so the NoGradGuard constructed after it is what keeps autograd off in both cases.
  class EvalGuard {
   public:
    explicit EvalGuard(bool inference) : inference_(inference) {}

   private:
    c10::InferenceMode inference_;
    torch::NoGradGuard no_grad_;
  };

  struct SchedulerSlot {
    std::shared_ptr<torch::optim::LRScheduler> scheduler;
    SchedulerInterval interval;
    std::int64_t frequency;
    std::int64_t intervals = 0;  // intervals seen (steps or epochs)
    std::int64_t steps = 0;      // scheduler.step() calls, saved in checkpoints
  };

  template <class E>
  void add_extra(E&& extra) {
    using T = std::remove_cvref_t<E>;
    if constexpr (std::same_as<T, Precision>) {
      precision_ = std::forward<E>(extra);
    } else if constexpr (std::derived_from<T, Logger>) {
      auto logger = std::make_shared<T>(std::forward<E>(extra));
      // A logger without a save_dir writes under default_root_dir, as Lightning's do.
      if constexpr (requires { logger->set_default_save_dir(options_.default_root_dir); }) {
        logger->set_default_save_dir(options_.default_root_dir);
      }
      loggers_.push_back(std::move(logger));
    } else if constexpr (detail::logger_pointer<T>) {
      if constexpr (requires { extra->set_default_save_dir(options_.default_root_dir); }) {
        extra->set_default_save_dir(options_.default_root_dir);
      }
      loggers_.push_back(std::forward<E>(extra));
    } else if constexpr (std::same_as<T, ModelCheckpoint>) {
      deferred_checkpoints_.push_back(std::forward<E>(extra));
    } else {
      callbacks_.add(std::forward<E>(extra));
    }
  }

  void add_default_callbacks() {
    const auto progress_bars = callbacks_.count<ProgressBar>();
    if (progress_bars > 1) {
      throw MisconfigurationError(
          "You added multiple progress bar callbacks to the Trainer, but currently only one progress bar is supported.");
    }
    if (!options_.enable_progress_bar && progress_bars == 1) {
      throw MisconfigurationError(
          "Trainer was configured with `enable_progress_bar=False` but found `ProgressBar` in callbacks list.");
    }
    if (!options_.enable_checkpointing && callbacks_.count<ModelCheckpoint>() > 0) {
      throw MisconfigurationError(
          "Trainer was configured with `enable_checkpointing=False` but found `ModelCheckpoint` in callbacks list.");
    }
    if (options_.enable_progress_bar && progress_bars == 0) callbacks_.add(ProgressBar{});
    if (options_.enable_model_summary && callbacks_.count<ModelSummary>() == 0) callbacks_.add(ModelSummary{});
    if (options_.enable_checkpointing && callbacks_.count<ModelCheckpoint>() == 0) callbacks_.add(ModelCheckpoint{});
  }

  template <class M>
  void prepare_module(M& module) {
    precision_.convert_module(module);
    module.to(root_device());
    strategy_.setup_module(module);
    state_.model = &module;
    state_.root_device = root_device();
    state_.default_root_dir = options_.default_root_dir;
    state_.metrics_ = &metrics_;
    state_.loggers.clear();
    for (const auto& logger : loggers_) state_.loggers.push_back(logger.get());
  }

  template <class Batch>
  std::remove_cvref_t<Batch> prepare_batch(Batch&& batch) {
    return batch_to_device(precision_.convert_input(std::forward<Batch>(batch)), root_device());
  }

  // Model hooks: `hook(ctx)` or `hook()` when the model defines them.
#define VOLT_DETAIL_MODEL_HOOK(name)                                      \
  template <class M>                                                     \
  void model_##name(M& module) {                                         \
    if constexpr (requires { module.name(context_); }) {                 \
      module.name(context_);                                             \
    } else if constexpr (requires { module.name(); }) {                  \
      module.name();                                                     \
    }                                                                    \
  }
  VOLT_DETAIL_MODEL_HOOK(on_fit_start)
  VOLT_DETAIL_MODEL_HOOK(on_fit_end)
  VOLT_DETAIL_MODEL_HOOK(on_train_start)
  VOLT_DETAIL_MODEL_HOOK(on_train_end)
  VOLT_DETAIL_MODEL_HOOK(on_train_epoch_start)
  VOLT_DETAIL_MODEL_HOOK(on_train_epoch_end)
  VOLT_DETAIL_MODEL_HOOK(on_validation_epoch_start)
  VOLT_DETAIL_MODEL_HOOK(on_validation_epoch_end)
  VOLT_DETAIL_MODEL_HOOK(on_test_epoch_start)
  VOLT_DETAIL_MODEL_HOOK(on_test_epoch_end)
#undef VOLT_DETAIL_MODEL_HOOK

  void log_to_loggers(std::map<std::string, double> values, std::int64_t step) {
    if (values.empty() || !state_.is_global_zero) return;
    values["epoch"] = static_cast<double>(state_.current_epoch);
    for (const auto& logger : loggers_) logger->log_metrics(values, step);
  }

  void finalize_loggers(const std::string& status) {
    if (!state_.is_global_zero) return;
    for (const auto& logger : loggers_) logger->finalize(status);
  }

  // ---- the fit loop ------------------------------------------------------------------------------

  template <class Model, class TrainData, class ValData>
  void run_fit(Model& model, TrainData& train_data, ValData& val_data, const std::filesystem::path& ckpt_path) {
    using M = detail::module_t<Model>;
    using Batch = detail::batch_t<TrainData>;
    detail::check_trainable<M, Batch>();
    constexpr bool has_val_data = !std::is_same_v<std::remove_cvref_t<ValData>, detail::NoData>;
    if constexpr (has_val_data) {
      static_assert(detail::has_validation_step<M, detail::batch_t<ValData>>,
                    "volt: fit() was given validation data, but the model has no `validation_step(batch[, "
                    "batch_idx[, ctx]])` for its batch type");
    }
    if constexpr (detail::has_training_step<M, Batch> && detail::has_configure_optimizers<M>) {
      auto module = detail::model_module(model);
      TORCH_CHECK(module != nullptr, "volt: fit() was given an empty model pointer");
      prepare_module(*module);
      metrics_.clear();
      state_.stage = Stage::fitting;
      state_.should_stop = false;
      state_.validation_has_run = false;
      state_.global_step = 0;
      state_.current_epoch = 0;
      state_.fast_dev_run = options_.fast_dev_run > 0;
      state_.max_steps = options_.max_steps;
      state_.max_epochs = options_.max_epochs;
      if (!state_.max_epochs) {
        if (options_.max_steps == -1) {
          log::warn_rank_zero("`max_epochs` was not set. Setting it to 1000 epochs. To train without an epoch "
                              "limit, set `max_epochs=-1`.");
          state_.max_epochs = 1000;
        } else {
          state_.max_epochs = -1;
        }
      }
      state_.log_every_n_steps = options_.log_every_n_steps;
      state_.has_validation = has_val_data && !(options_.limit_val_batches.is_fraction()
                                                    ? options_.limit_val_batches.fraction() == 0.0
                                                    : options_.limit_val_batches.count() == 0);
      state_.validates_at_epoch_end = options_.val_check_interval.is_whole_epoch() &&
                                      options_.check_val_every_n_epoch.value_or(0) == 1;
      state_.device_stats = [this] {
        return visit_accelerator(selection_.accelerator,
                                 [this](auto accelerator) { return decltype(accelerator)::get_device_stats(root_device()); });
      };

      // Optimizers and schedulers.
      config_ = detail::configure_optimizers(*module);
      schedulers_.clear();
      if (config_.lr_scheduler) {
        schedulers_.push_back({config_.lr_scheduler, config_.interval, std::max<std::int64_t>(1, config_.frequency)});
      }
      state_.optimizers = {config_.optimizer.get()};
      state_.save_checkpoint = [this, module](const std::filesystem::path& path, bool weights_only) {
        state_.last_checkpoint_saved = false;
        try {
          write_checkpoint(*module, path, weights_only);
          state_.last_checkpoint_saved = true;
        } catch (const CheckpointError& error) {
          if (state_.stage == Stage::none || options_.on_checkpoint_failure == CheckpointFailure::raise) throw;
          log::warn_rank_zero(std::string(error.what()) + "; training continues (on_checkpoint_failure=warn).");
        }
      };

      const auto train_size = detail::size_of(train_data);
      train_limit_ = batch_limit(options_.limit_train_batches, train_size, "limit_train_batches");
      // Known when the data has a size (or fast_dev_run fixes it); otherwise learned in the first epoch.
      state_.num_training_batches =
          train_size || options_.fast_dev_run > 0 ? train_limit_ : std::optional<std::int64_t>{};

      std::optional<std::int64_t> val_size;
      if constexpr (has_val_data) val_size = detail::size_of(val_data);
      check_data_sizes(train_size, val_size);

      resume_ = {};
      if (!ckpt_path.empty()) {
        try {
          read_checkpoint(*module, ckpt_path);
        } catch (const CheckpointError&) {
          throw;
        } catch (const std::exception& error) {
          throw CheckpointError("volt: cannot resume from " + ckpt_path.string() +
                                " (corrupted, or written by another configuration): " + error.what());
        }
      }

      setup_cuda_graphs();
      // The graph and its memory live for this fit(); the optimizer's state is LibTorch's again afterwards.
      struct GraphRelease {
        detail::TrainStepGraph& graph;
        ~GraphRelease() {
          try {
            graph.release();
          } catch (...) {
            // a device error here was already reported by the step that caused it
          }
        }
      } graph_release{graph_};

      bool finished = false;
      interrupted_ = false;
      detail::ScopedInterruptHandler interrupt_handler(options_.handle_signals);
      try {
        callbacks_.run(detail::Hook::setup, state_);
        if (state_.is_global_zero && !loggers_.empty()) {
          std::map<std::string, std::string> params;
          if constexpr (requires { module->hparams(); }) params = module->hparams();
          params["accelerator"] = std::string(to_string(selection_.accelerator));
          params["precision"] = std::string(Precision::name);
          params["strategy"] = std::string(Strategy::name);
          for (const auto& logger : loggers_) logger->log_hyperparams(params);
        }
        model_on_fit_start(*module);
        callbacks_.run(detail::Hook::on_fit_start, state_);
        if constexpr (has_val_data) {
          if (state_.has_validation && options_.num_sanity_val_steps != 0) sanity_check(*module, val_data);
        }
        model_on_train_start(*module);
        callbacks_.run(detail::Hook::on_train_start, state_);
        fit_epochs(*module, train_data, val_data);
        if (interrupted_) {
          finish_interrupted(*module);
          return;
        }
        model_on_train_end(*module);
        callbacks_.run(detail::Hook::on_train_end, state_);
        model_on_fit_end(*module);
        callbacks_.run(detail::Hook::on_fit_end, state_);
        finished = true;
        log::info_rank_zero("`Trainer.fit` stopped: " + stop_reason_ + ".");
        finalize_loggers("success");
        callbacks_.run(detail::Hook::teardown, state_);
      } catch (...) {
        const auto error = std::current_exception();
        if constexpr (Strategy::is_distributed) {
          std::string what = "unknown exception";
          try {
            std::rethrow_exception(error);
          } catch (const std::exception& e) {
            what = e.what();
          } catch (...) {
          }
          strategy_.on_failure(what);
        }
        for (detail::AnyCallback* callback : callbacks_.with(detail::Hook::on_exception)) {
          callback->run_exception(state_, error);
        }
        if (!finished) {
          try {
            finalize_loggers("failed");
            callbacks_.run(detail::Hook::teardown, state_);
          } catch (...) {
            // the original error is the one to report
          }
        }
        state_.stage = Stage::none;
        throw;
      }
      state_.stage = Stage::none;
    }
  }

  /// Checks, before training starts, the limits and intervals that depend on the data sizes (Lightning's
  /// messages): a fraction that selects no batch, an integer val_check_interval longer than the epoch.
  void check_data_sizes(std::optional<std::int64_t> train_size, std::optional<std::int64_t> val_size) const {
    auto check_fraction = [](const BatchAmount& amount, std::optional<std::int64_t> size, const char* stage) {
      if (!size || *size == 0 || !amount.is_fraction() || amount.fraction() == 0.0 || amount.of(*size) > 0) return;
      throw MisconfigurationError("You requested to check " + amount.to_string() + " of the `" + stage +
                                  "_dataloader` but " + amount.to_string() + " * " + std::to_string(*size) +
                                  " < 1. Please increase the `limit_" + stage + "_batches` argument. Try at least `limit_" +
                                  stage + "_batches=" + std::to_string(1.0 / static_cast<double>(*size)) + "`");
    };
    check_fraction(options_.limit_train_batches, train_size, "train");
    if (state_.has_validation) check_fraction(options_.limit_val_batches, val_size, "val");
    const auto& interval = options_.val_check_interval;
    if (state_.has_validation && state_.num_training_batches && options_.check_val_every_n_epoch &&
        !interval.is_fraction() && interval.count() > *state_.num_training_batches) {
      throw std::invalid_argument(" `val_check_interval` (" + interval.to_string() +
                                  ") must be less than or equal to the number of the training batches (" +
                                  std::to_string(*state_.num_training_batches) +
                                  "). If you want to disable validation set `limit_val_batches` to 0.0 instead. If "
                                  "you want to validate based on the total training batches, set "
                                  "`check_val_every_n_epoch=None`.");
    }
  }

  /// After a SIGINT/SIGTERM between two batches: checkpoint, on_exception, loggers, teardown (Lightning's
  /// KeyboardInterrupt handling), then fit() returns.
  template <class M>
  void finish_interrupted(M& module) {
    const int signal = detail::interrupt_signal;
    const std::string name = signal == SIGTERM ? "SIGTERM" : "SIGINT";
    stop_reason_ = "interrupted by " + name;
    std::string saved;
    if (auto* checkpoint = checkpoint_callback(); checkpoint != nullptr && options_.fast_dev_run == 0) {
      const auto folder = !checkpoint->dirpath().empty() ? checkpoint->dirpath()
                                                          : std::filesystem::path(options_.default_root_dir) / "checkpoints";
      const auto path = folder / "interrupted.ckpt";
      try {
        write_checkpoint(module, path, false);
        saved = "; resume with fit(..., \"" + path.string() + "\")";
      } catch (const CheckpointError& error) {
        log::warn_rank_zero(error.what());
      }
    }
    log::info_rank_zero("\nDetected " + name + ", attempting graceful shutdown after epoch " +
                        std::to_string(state_.current_epoch) + ", batch " + std::to_string(state_.batch_idx) +
                        " (global step " + std::to_string(state_.global_step) + ")" + saved + ".");
    const auto error = std::make_exception_ptr(TrainingInterrupted("volt: training " + stop_reason_));
    for (detail::AnyCallback* callback : callbacks_.with(detail::Hook::on_exception)) {
      callback->run_exception(state_, error);
    }
    finalize_loggers("failed");
    callbacks_.run(detail::Hook::teardown, state_);
    state_.stage = Stage::none;
  }

  /// How many batches of data of `total` batches (nullopt: size unknown) a limit allows; nullopt means all.
  /// fast_dev_run caps every limit.
  std::optional<std::int64_t> batch_limit(const BatchAmount& amount, std::optional<std::int64_t> total,
                                          const char* name) const {
    std::optional<std::int64_t> limit;
    if (total) {
      limit = amount.of(*total);
    } else if (amount.is_fraction() && !amount.is_whole_epoch()) {
      throw MisconfigurationError(std::string("A fractional `") + name + "` needs data whose size is known; wrap "
                                  "the loader with volt::sized(loader, batches) or pass a batch count.");
    } else if (!amount.is_fraction()) {
      limit = amount.count();
    }
    if (options_.fast_dev_run > 0) limit = limit ? std::min(*limit, options_.fast_dev_run) : options_.fast_dev_run;
    return limit;
  }

  bool min_training_done() const {
    const bool epochs_ok = !options_.min_epochs || state_.current_epoch >= *options_.min_epochs;
    const bool steps_ok = !options_.min_steps || state_.global_step >= *options_.min_steps;
    return epochs_ok && steps_ok;
  }
  bool max_steps_reached() const { return options_.max_steps >= 0 && state_.global_step >= options_.max_steps; }

  bool should_validate_this_epoch() const {
    if (!state_.has_validation) return false;
    const auto every = options_.check_val_every_n_epoch;
    return !every || (state_.current_epoch + 1) % *every == 0;
  }

  template <class M, class TrainData, class ValData>
  void fit_epochs(M& module, TrainData& train_data, ValData& val_data) {
    constexpr bool has_val_data = !std::is_same_v<std::remove_cvref_t<ValData>, detail::NoData>;
    const std::int64_t k = options_.accumulate_grad_batches;
    std::int64_t total_batch_idx = 0;
    while (true) {
      if (state_.max_epochs && *state_.max_epochs >= 0 && state_.current_epoch >= *state_.max_epochs) {
        stop_reason_ = "`max_epochs=" + std::to_string(*state_.max_epochs) + "` reached";
        break;
      }
      if (max_steps_reached()) {
        stop_reason_ = "`max_steps=" + std::to_string(options_.max_steps) + "` reached";
        break;
      }
      if (state_.should_stop && min_training_done()) {
        stop_reason_ = "stopped by a callback (should_stop)";
        break;
      }
      state_.phase_ = MetricPhase::train;
      module.train();
      const bool resuming_mid_epoch = resume_.batches_done > 0;
      if (!resuming_mid_epoch) {
        model_on_train_epoch_start(module);
        callbacks_.run(detail::Hook::on_train_epoch_start, state_);
      }
      if (resuming_mid_epoch) detail::set_cpu_rng_state(resume_.epoch_start_rng);
      epoch_start_rng_ = detail::cpu_rng_state();

      auto&& range = detail::as_range(train_data);
      std::int64_t batch_idx = 0;
      auto where = [&] {
        return "epoch " + std::to_string(state_.current_epoch) + ", training batch " + std::to_string(batch_idx) +
               " (global step " + std::to_string(state_.global_step) + ")";
      };
      auto it = [&] {
        try {
          return std::begin(range);
        } catch (...) {
          detail::rethrow_with_context(where());
        }
      }();
      const auto end = std::end(range);
      if (resuming_mid_epoch) {
        try {
          for (; batch_idx < resume_.batches_done && it != end; ++batch_idx) ++it;
        } catch (...) {
          detail::rethrow_with_context(where() + " while skipping to the resume point");
        }
        detail::set_cpu_rng_state(resume_.rng);
        resume_.batches_done = 0;
      }
      const auto limit = train_limit_;
      std::optional<std::int64_t> val_check_batch;
      if (state_.num_training_batches) val_check_batch = detail::batches_for(options_.val_check_interval, *state_.num_training_batches);
      else if (!options_.val_check_interval.is_fraction()) val_check_batch = options_.val_check_interval.count();

      while (it != end && (!limit || batch_idx < *limit)) {
        bool is_last = false;
        try {
          // A reference into the user's container is copied (tensors are shared, not cloned), a prvalue moved.
          auto batch = prepare_batch(*it);
          ++it;
          is_last = it == end || (limit && batch_idx + 1 >= *limit);
          train_batch(module, batch, batch_idx, is_last, k);
        } catch (...) {
          detail::rethrow_with_context(where());
        }
        ++total_batch_idx;

        bool validate_now = false;
        if constexpr (has_val_data) {
          if (should_validate_this_epoch()) {
            if (state_.should_stop && min_training_done()) {
              validate_now = true;
            } else if (options_.check_val_every_n_epoch && options_.val_check_interval.is_whole_epoch()) {
              validate_now = is_last;
            } else if (val_check_batch) {
              const auto iteration = options_.check_val_every_n_epoch ? batch_idx : total_batch_idx - 1;
              validate_now = (iteration + 1) % *val_check_batch == 0;
            } else {
              validate_now = is_last;
            }
          }
          if (validate_now) {
            run_validation(module, val_data, Stage::fitting);
            agree_on_stop();
            state_.phase_ = MetricPhase::train;
            module.train();
          }
        }
        ++batch_idx;
        if (detail::interrupt_signal != 0) {
          interrupted_ = true;
          return;
        }
        if (max_steps_reached() || (state_.should_stop && min_training_done())) break;
      }
      if (!state_.num_training_batches && !limit) state_.num_training_batches = batch_idx;
      finish_epoch(module, batch_idx);
    }
  }

  template <class M>
  void finish_epoch(M& module, std::int64_t batches_done) {
    resume_point_ = {state_.current_epoch, batches_done, true};
    model_on_train_epoch_end(module);
    // Lightning runs the monitoring callbacks (checkpointing, early stopping) after the others.
    for (detail::AnyCallback* callback : callbacks_.with(detail::Hook::on_train_epoch_end)) {
      if (!is_monitoring(*callback)) callback->run(detail::Hook::on_train_epoch_end, state_);
    }
    log_to_loggers(metrics_.end_epoch(MetricPhase::train, ranks_reducer()),
                   std::max<std::int64_t>(0, state_.global_step - 1));
    for (detail::AnyCallback* callback : callbacks_.with(detail::Hook::on_train_epoch_end)) {
      if (is_monitoring(*callback)) callback->run(detail::Hook::on_train_epoch_end, state_);
    }
    step_schedulers(SchedulerInterval::epoch);
    ++state_.current_epoch;
    resume_point_ = {state_.current_epoch, 0, false};
    agree_on_stop();
  }

  /// Combines epoch metrics across ranks under DDP (every rank then sees the same monitored values, so
  /// checkpointing and early stopping decide alike); nothing without it.
  std::function<void(std::vector<double>&, Reduce)> ranks_reducer() {
    if constexpr (!Strategy::is_distributed) {
      return {};
    } else {
      if (strategy_.world_size() == 1) return {};
      return [this](std::vector<double>& values, Reduce kind) {
        torch::Tensor tensor = torch::tensor(values, torch::kDouble).to(root_device());
        const ReduceOp op = kind == Reduce::sum ? ReduceOp::sum
                            : kind == Reduce::max ? ReduceOp::max
                            : kind == Reduce::min ? ReduceOp::min
                                                           : ReduceOp::mean;
        strategy_.all_reduce(tensor, op);
        tensor = tensor.cpu();
        for (std::size_t i = 0; i < values.size(); ++i) values[i] = tensor[static_cast<std::int64_t>(i)].item<double>();
      };
    }
  }

  /// Lightning's reduce_boolean_decision on should_stop: any rank asking to stop stops them all.
  void agree_on_stop() {
    if constexpr (Strategy::is_distributed) {
      state_.should_stop = strategy_.reduce_boolean_decision(state_.should_stop, /*all=*/false);
    }
  }

  static bool is_monitoring(detail::AnyCallback& callback) {
    return callback.get(typeid(ModelCheckpoint)) != nullptr || callback.get(typeid(EarlyStopping)) != nullptr;
  }

  void step_schedulers(SchedulerInterval interval) {
    for (auto& slot : schedulers_) {
      if (slot.interval != interval) continue;
      if (++slot.intervals % slot.frequency == 0) {
        slot.scheduler->step();
        ++slot.steps;
      }
    }
  }

  template <class M, class Batch>
  void train_batch(M& module, Batch& batch, std::int64_t batch_idx, bool is_last, std::int64_t k) {
    if (graph_.enabled()) {
      if (graph_.captured()) {
        const auto leaves = detail::tensor_leaves(batch);
        if (graph_.matches(leaves)) {
          replay_train_batch(leaves, batch_idx);
          return;
        }
        // Other shapes (a short last batch): an eager step between replays.
        graph_.before_eager_step();
        eager_train_batch(module, batch, batch_idx, is_last, k);
        graph_.after_eager_step();
        return;
      }
      if (graph_.eager_steps() >= options_.cuda_graph_warmup_steps) {
        capture_train_batch(module, batch, batch_idx, is_last, k);
        return;
      } else if (graph_.eager_steps() + 1 == options_.cuda_graph_warmup_steps) {
        // The last warm-up step runs on the capture's stream (cuBLAS/cuDNN workspaces are per stream).
        run_on_capture_stream([&] { eager_train_batch(module, batch, batch_idx, is_last, k); });
        graph_.count_eager_step();
        return;
      }
      eager_train_batch(module, batch, batch_idx, is_last, k);
      graph_.count_eager_step();
      return;
    }
    eager_train_batch(module, batch, batch_idx, is_last, k);
  }

  template <class M, class Batch>
  void eager_train_batch(M& module, Batch& batch, std::int64_t batch_idx, bool is_last, std::int64_t k,
                         bool batch_started = false) {
    state_.batch_idx = batch_idx;
    if (!batch_started) {
      for (detail::AnyCallback* callback : callbacks_.with(detail::Hook::on_train_batch_start)) {
        callback->run_batch_start(state_, batch_idx);
      }
    }
    torch::Tensor loss;
    if constexpr (Strategy::is_distributed) strategy_.sync_buffers(module);
    {
      auto context = precision_.forward_context();
      loss = detail::call_training_step(module, batch, batch_idx, context_);
    }
    TORCH_CHECK(loss.defined(), "volt: training_step returned an undefined tensor at epoch ", state_.current_epoch,
                ", batch ", batch_idx);
    if (options_.error_on_nonfinite_loss && !torch::isfinite(loss.detach()).all().template item<bool>()) {
      const double value = loss.detach().sum().template item<double>();
      throw std::runtime_error("volt: the training loss is " + (std::isnan(value) ? std::string("NaN") : std::to_string(value)) +
                               " at global step " + std::to_string(state_.global_step) + " (epoch " +
                               std::to_string(state_.current_epoch) + ", batch " + std::to_string(batch_idx) +
                               "); stopping because error_on_nonfinite_loss is set.");
    }
    torch::optim::Optimizer& optimizer = *config_.optimizer;
    const bool window_start = batch_idx % k == 0;
    const bool step_now = (batch_idx + 1) % k == 0 || is_last;
    torch::Tensor to_backward = k > 1 ? loss / static_cast<double>(k) : loss;
    if (window_start) {
      callbacks_.run(detail::Hook::on_before_zero_grad, state_);
      optimizer.zero_grad();
    }
    torch::Tensor scaled = precision_.pre_backward(to_backward);
    for (detail::AnyCallback* callback : callbacks_.with(detail::Hook::on_before_backward)) {
      callback->run_before_backward(state_, scaled);
    }
    strategy_.prepare_for_backward(step_now);
    scaled.backward();
    if (step_now) strategy_.finish_gradient_sync();
    callbacks_.run(detail::Hook::on_after_backward, state_);
    if (step_now) {
      const bool stepped = precision_.optimizer_step(optimizer, [&] {
        for (detail::AnyCallback* callback : callbacks_.with(detail::Hook::on_before_optimizer_step)) {
          callback->run_before_optimizer_step(state_, optimizer);
        }
        clip_gradients(optimizer);
      });
      if (!stepped) {
        if constexpr (requires { precision_.scaler()->get_scale(); }) {
          if (precision_.scaler() != nullptr) {
            log::info_rank_zero("volt: global step " + std::to_string(state_.global_step) + " (epoch " +
                                std::to_string(state_.current_epoch) + ", batch " + std::to_string(batch_idx) +
                                "): gradients overflowed under " + std::string(Precision::name) +
                                "; the grad scaler skipped the optimizer step and lowered its scale to " +
                                std::to_string(precision_.scaler()->get_scale()) + ".");
          }
        }
      }
      after_optimizer_step();
    }
    end_train_batch(loss, batch_idx);
  }

  /// What follows each optimizer step: the step count, step-interval schedulers, the logger flush.
  void after_optimizer_step() {
    ++state_.global_step;
    step_schedulers(SchedulerInterval::step);
    if (options_.log_every_n_steps > 0 && state_.global_step % options_.log_every_n_steps == 0) {
      log_to_loggers(metrics_.take_step_values_for_logger(), state_.global_step - 1);
    }
  }

  void end_train_batch(const torch::Tensor& loss, std::int64_t batch_idx) {
    resume_point_ = {state_.current_epoch, batch_idx + 1, false};
    for (detail::AnyCallback* callback : callbacks_.with(detail::Hook::on_train_batch_end)) {
      callback->run_batch_end(detail::Hook::on_train_batch_end, state_, loss, batch_idx);
    }
  }

  /// Clips the gradients on the device (no host sync, so also inside a captured step); the coefficient is
  /// torch::nn::utils::clip_grad_norm_'s.
  void clip_gradients(torch::optim::Optimizer& optimizer) {
    if (!options_.gradient_clip_val || *options_.gradient_clip_val <= 0.0) return;
    std::vector<torch::Tensor> gradients;
    for (const auto& group : optimizer.param_groups()) {
      for (const auto& parameter : group.params()) gradients.push_back(parameter.grad());
    }
    if (options_.gradient_clip_algorithm == GradClipAlgorithm::norm) {
      (void)optim::clip_grad_norm_(gradients, *options_.gradient_clip_val);
    } else {
      optim::clip_grad_value_(gradients, *options_.gradient_clip_val);
    }
  }

  // ---- CUDA graph of the training step (TrainerOptions::cuda_graphs; see trainer/cuda_graph.hpp) ---------

  /// Why this fit()'s training step cannot be captured; empty when it can.
  std::vector<std::string> cuda_graph_obstacles() {
    std::vector<std::string> obstacles;
    const auto device = root_device();
    if (!device.is_cuda()) {
      obstacles.push_back(std::string("the device is ") + c10::DeviceTypeName(device.type(), /*lower_case=*/true) +
                          ", not cuda");
    }
    if (!detail::cuda_graphs_compiled) {
      obstacles.push_back(std::string("this build cannot capture CUDA graphs (it needs VOLT_WITH_CUDA and LibTorch 2.4 "
                                      "or later; LibTorch is ") +
                          TORCH_VERSION + ")");
    }
    if constexpr (Strategy::is_distributed) {
      obstacles.push_back("the strategy is " + std::string(Strategy::name) +
                          " (a captured step cannot contain the gradient all-reduce)");
    }
    if (options_.accumulate_grad_batches > 1) {
      obstacles.push_back("accumulate_grad_batches is " + std::to_string(options_.accumulate_grad_batches) +
                          " (a captured step is one whole optimizer step)");
    }
    if (options_.error_on_nonfinite_loss) {
      obstacles.push_back("error_on_nonfinite_loss reads the loss on the host at every step");
    }
    const std::pair<detail::Hook, const char*> inner_hooks[] = {
        {detail::Hook::on_before_zero_grad, "on_before_zero_grad"},
        {detail::Hook::on_before_backward, "on_before_backward"},
        {detail::Hook::on_after_backward, "on_after_backward"},
        {detail::Hook::on_before_optimizer_step, "on_before_optimizer_step"}};
    for (const auto& [hook, hook_name] : inner_hooks) {
      for (detail::AnyCallback* callback : callbacks_.with(hook)) {
        obstacles.push_back("the callback " + c10::demangle(std::string(callback->type_name()).c_str()) +
                            " has " + hook_name + ", which runs inside the step");
      }
    }
    if (auto why = optim::CapturableStep::obstacle(*config_.optimizer, device.type())) obstacles.push_back(*why);
    return obstacles;
  }

  void setup_cuda_graphs() {
    graph_.reset();
    if (!options_.cuda_graphs) return;
    const auto obstacles = cuda_graph_obstacles();
    if (obstacles.empty()) {
      graph_.enable();
      log::info_rank_zero("cuda_graphs: the training step is captured in a CUDA graph after " +
                          std::to_string(options_.cuda_graph_warmup_steps) + " eager step(s) and replayed.");
      return;
    }
    std::string text = "cuda_graphs=true, but the training step cannot be captured: ";
    for (std::size_t i = 0; i < obstacles.size(); ++i) text += (i == 0 ? "" : "; ") + obstacles[i];
    log::warn_rank_zero(text + ". Training eagerly.");
  }

  template <class Step>
  void run_on_capture_stream([[maybe_unused]] Step&& step) {
#if VOLT_DETAIL_HAS_CUDA_GRAPHS
    graph_.on_side_stream(root_device(), std::forward<Step>(step));
#else
    step();
#endif
  }

  /// Captures the training step on `batch` and runs it once; when the capture fails, the graph stays off for
  /// this fit() and the batch runs eagerly.
  template <class M, class Batch>
  void capture_train_batch(M& module, Batch& batch, std::int64_t batch_idx, bool is_last, std::int64_t k) {
#if VOLT_DETAIL_HAS_CUDA_GRAPHS
    torch::optim::Optimizer& optimizer = *config_.optimizer;
    GradScaler* scaler = precision_.scaler();
    const bool scaling = scaler != nullptr && scaler->is_enabled();
    try {
      graph_.prepare(optimizer, scaling, root_device());
    } catch (const std::exception& error) {
      graph_.disable();
      log::warn_rank_zero(std::string("cuda_graphs: cannot capture the training step (") + error.what() +
                          "). Training eagerly.");
      eager_train_batch(module, batch, batch_idx, is_last, k);
      return;
    }
    state_.batch_idx = batch_idx;
    for (detail::AnyCallback* callback : callbacks_.with(detail::Hook::on_train_batch_start)) {
      callback->run_batch_start(state_, batch_idx);
    }
    graph_.set_static_batch(batch);
    Batch& static_batch = graph_.template static_batch<Batch>();
    const std::string error = graph_.capture(root_device(), metrics_, [&] {
      torch::Tensor loss;
      {
        auto context = precision_.forward_context();
        loss = detail::call_training_step(module, static_batch, batch_idx, context_);
      }
      TORCH_CHECK(loss.defined(), "volt: training_step returned an undefined tensor");
      precision_.pre_backward(loss).backward();
      if (scaling) scaler->unscale_on_device(optimizer, graph_.found_inf());
      clip_gradients(optimizer);
      if (scaling) {
        graph_.optimizer_step().step(graph_.found_inf());
        scaler->update_on_device(graph_.found_inf());
      } else {
        graph_.optimizer_step().step();
      }
      return loss;
    });
    if (!error.empty()) {
      graph_.disable();
      log::warn_rank_zero("cuda_graphs: capturing the training step failed (" + error +
                          "). Training eagerly from this batch on.");
      eager_train_batch(module, batch, batch_idx, is_last, k, /*batch_started=*/true);
      return;
    }
    metrics_.replay(graph_.logs());
    after_optimizer_step();
    end_train_batch(graph_.loss(), batch_idx);
#else
    eager_train_batch(module, batch, batch_idx, is_last, k);
#endif
  }

  void replay_train_batch([[maybe_unused]] const std::vector<torch::Tensor>& leaves,
                          [[maybe_unused]] std::int64_t batch_idx) {
#if VOLT_DETAIL_HAS_CUDA_GRAPHS
    state_.batch_idx = batch_idx;
    for (detail::AnyCallback* callback : callbacks_.with(detail::Hook::on_train_batch_start)) {
      callback->run_batch_start(state_, batch_idx);
    }
    graph_.load(leaves);
    graph_.replay();
    metrics_.replay(graph_.logs());
    after_optimizer_step();
    end_train_batch(graph_.loss(), batch_idx);
#endif
  }

  // ---- evaluation --------------------------------------------------------------------------------

  template <class M, class Data>
  void sanity_check(M& module, Data& val_data) {
    const Stage previous = state_.stage;
    state_.stage = Stage::sanity_checking;
    callbacks_.run(detail::Hook::on_sanity_check_start, state_);
    const std::int64_t steps = options_.num_sanity_val_steps;
    run_validation(module, val_data, Stage::sanity_checking,
                   steps < 0 ? std::optional<std::int64_t>{} : std::optional<std::int64_t>{steps});
    // Lightning discards what the sanity check logged.
    metrics_.discard(MetricPhase::validation);
    callbacks_.run(detail::Hook::on_sanity_check_end, state_);
    state_.stage = previous;
  }

  /// One validation run (Lightning's evaluation loop): hooks, the steps, the epoch metrics.
  template <class M, class Data>
  void run_validation(M& module, Data& val_data, Stage stage, std::optional<std::int64_t> limit_override = {}) {
    const auto limit = limit_override ? limit_override
                                      : batch_limit(options_.limit_val_batches, detail::size_of(val_data),
                                                    "limit_val_batches");
    const Stage previous = state_.stage;
    state_.stage = stage;
    callbacks_.run(detail::Hook::on_validation_start, state_);
    model_on_validation_epoch_start(module);
    callbacks_.run(detail::Hook::on_validation_epoch_start, state_);
    evaluate(module, val_data, MetricPhase::validation, limit);
    auto values = metrics_.end_epoch(MetricPhase::validation, ranks_reducer());
    model_on_validation_epoch_end(module);
    callbacks_.run(detail::Hook::on_validation_epoch_end, state_);
    if (stage == Stage::fitting) {
      log_to_loggers(values, std::max<std::int64_t>(0, state_.global_step - 1));
      state_.validation_has_run = true;
    }
    last_eval_metrics_ = std::move(values);
    callbacks_.run(detail::Hook::on_validation_end, state_);
    state_.stage = previous;
  }

  /// Runs the phase's step over up to `limit` batches, in eval mode, without autograd.
  template <class M, class Data>
  void evaluate(M& module, Data& data, MetricPhase phase, std::optional<std::int64_t> limit) {
    const bool was_training = module.is_training();
    module.eval();
    state_.phase_ = phase;
    EvalGuard guard(options_.inference_mode);
    std::int64_t batch_idx = 0;
    for (auto&& raw : detail::as_range(data)) {
      if (limit && batch_idx >= *limit) break;
      try {
        auto batch = prepare_batch(std::forward<decltype(raw)>(raw));
        state_.batch_idx = batch_idx;
        {
          auto context = precision_.forward_context();
          if (phase == MetricPhase::test) {
            if constexpr (detail::has_test_step<M, std::remove_cvref_t<decltype(batch)>>) {
              detail::call_test_step(module, batch, batch_idx, context_);
            }
          } else {
            if constexpr (detail::has_validation_step<M, std::remove_cvref_t<decltype(batch)>>) {
              detail::call_validation_step(module, batch, batch_idx, context_);
            }
          }
        }
        const auto hook = phase == MetricPhase::test ? detail::Hook::on_test_batch_end : detail::Hook::on_validation_batch_end;
        for (detail::AnyCallback* callback : callbacks_.with(hook)) {
          callback->run_batch_end(hook, state_, torch::Tensor(), batch_idx);
        }
      } catch (...) {
        detail::rethrow_with_context("epoch " + std::to_string(state_.current_epoch) + ", " +
                                     (phase == MetricPhase::test ? "test" : "validation") + " batch " +
                                     std::to_string(batch_idx));
      }
      ++batch_idx;
    }
    state_.num_val_batches = batch_idx;
    if (was_training) module.train();
  }

  template <class Model, class Data>
  std::map<std::string, double> run_standalone_evaluation(Model& model, Data& data, Stage stage) {
    using M = detail::module_t<Model>;
    using Batch = detail::batch_t<Data>;
    const bool testing = stage == Stage::testing;
    if constexpr (!detail::has_test_step<M, Batch>) {
      if (testing) throw MisconfigurationError("No `test_step()` method defined to run `Trainer.test`.");
    }
    if constexpr (!detail::has_validation_step<M, Batch>) {
      if (!testing) throw MisconfigurationError("No `validation_step()` method defined to run `Trainer.validate`.");
    }
    auto module = detail::model_module(model);
    prepare_module(*module);
    metrics_.clear();
    state_.stage = stage;
    std::map<std::string, double> values;
    if (testing) {
      const auto limit = batch_limit(options_.limit_test_batches, detail::size_of(data), "limit_test_batches");
      callbacks_.run(detail::Hook::on_test_start, state_);
      model_on_test_epoch_start(*module);
      evaluate(*module, data, MetricPhase::test, limit);
      values = metrics_.end_epoch(MetricPhase::test, ranks_reducer());
      model_on_test_epoch_end(*module);
      callbacks_.run(detail::Hook::on_test_epoch_end, state_);
      callbacks_.run(detail::Hook::on_test_end, state_);
    } else {
      run_validation(*module, data, stage);
      values = last_eval_metrics_;
    }
    log_to_loggers(values, state_.global_step);
    for (const auto& logger : loggers_) logger->save();
    state_.stage = Stage::none;
    return values;
  }

  // ---- checkpoints -------------------------------------------------------------------------------

  struct ResumePoint {
    std::int64_t epoch = 0;
    std::int64_t batches_done = 0;
    bool at_epoch_end = false;
  };
  struct ResumeState {
    std::int64_t batches_done = 0;
    torch::Tensor epoch_start_rng;
    torch::Tensor rng;
  };

  /// Each callback's entry in a checkpoint: its type and its rank among callbacks of that type (as
  /// Lightning's state_key), so a resume with callbacks added, removed or reordered finds the right state.
  std::vector<std::pair<detail::AnyCallback*, std::string>> callback_state_keys() {
    std::vector<std::pair<detail::AnyCallback*, std::string>> keys;
    std::map<std::string, int, std::less<>> seen;
    for (const auto& callback : callbacks_.all()) {
      const std::string type(callback->type_name());
      keys.emplace_back(&*callback, "callbacks/" + type + "/" + std::to_string(seen[type]++));
    }
    return keys;
  }

  template <class M>
  void write_checkpoint(M& module, const std::filesystem::path& path, bool weights_only) {
    graph_.sync_optimizer_state();  // a captured step counts Adam's steps on the device
    if (!state_.is_global_zero) return;
    torch::serialize::OutputArchive archive;
    archive.write("volt/format", c10::IValue(std::int64_t{1}));
    archive.write("volt/weights_only", c10::IValue(weights_only));
    torch::serialize::OutputArchive model_archive;
    module.save(model_archive);
    archive.write("model", model_archive);
    if (!weights_only) {
      archive.write("loop/epoch", c10::IValue(resume_point_.epoch));
      archive.write("loop/global_step", c10::IValue(state_.global_step));
      archive.write("loop/batches_done", c10::IValue(resume_point_.batches_done));
      archive.write("loop/at_epoch_end", c10::IValue(resume_point_.at_epoch_end));
      torch::serialize::OutputArchive optimizer_archive;
      config_.optimizer->save(optimizer_archive);
      archive.write("optimizer", optimizer_archive);
      std::vector<std::int64_t> scheduler_steps, scheduler_intervals;
      for (const auto& slot : schedulers_) {
        scheduler_steps.push_back(slot.steps);
        scheduler_intervals.push_back(slot.intervals);
      }
      archive.write("schedulers/steps", c10::IValue(c10::List<std::int64_t>(scheduler_steps)));
      archive.write("schedulers/intervals", c10::IValue(c10::List<std::int64_t>(scheduler_intervals)));
      torch::serialize::OutputArchive precision_archive;
      precision_.save(precision_archive);
      archive.write("precision", precision_archive);
      for (const auto& [callback, key] : callback_state_keys()) {
        torch::serialize::OutputArchive callback_archive;
        callback->save_state(callback_archive);
        archive.write(key, callback_archive);
      }
      archive.write("rng/cpu", detail::cpu_rng_state(), /*is_buffer=*/true);
      archive.write("rng/cpu_epoch_start", epoch_start_rng_.defined() ? epoch_start_rng_ : detail::cpu_rng_state(),
                    /*is_buffer=*/true);
    }
    detail::save_archive_atomically(archive, path);
  }

  template <class M>
  void read_checkpoint(M& module, const std::filesystem::path& path) {
    torch::serialize::InputArchive archive;
    detail::load_archive(archive, path, root_device());
    c10::IValue value;
    if (!archive.try_read("volt/format", value)) {
      throw CheckpointError("volt: " + path.string() + " is not a volt checkpoint (no volt/format entry)");
    }
    torch::serialize::InputArchive model_archive;
    if (!archive.try_read("model", model_archive)) {
      throw CheckpointError("volt: " + path.string() + " is not a volt checkpoint or is corrupted: it has no model");
    }
    detail::check_model_matches(model_archive, module, path.string());
    try {
      module.load(model_archive);
    } catch (const std::exception& error) {
      throw CheckpointError("volt: the model in " + path.string() + " does not match the model being fitted: " +
                            error.what());
    }
    archive.read("volt/weights_only", value);
    if (value.toBool()) {
      throw CheckpointError("volt: " + path.string() +
                            " holds weights only (save_weights_only); it cannot resume training. Load it with "
                            "volt::load_checkpoint_weights instead.");
    }
    archive.read("loop/epoch", value);
    const std::int64_t epoch = value.toInt();
    archive.read("loop/global_step", value);
    state_.global_step = value.toInt();
    archive.read("loop/batches_done", value);
    const std::int64_t batches_done = value.toInt();
    archive.read("loop/at_epoch_end", value);
    const bool at_epoch_end = value.toBool();
    // Schedulers: replay their steps, then the optimizer state restores the exact learning rates.
    c10::IValue steps, intervals;
    archive.read("schedulers/steps", steps);
    archive.read("schedulers/intervals", intervals);
    const auto step_list = steps.toIntList();
    const auto interval_list = intervals.toIntList();
    for (std::size_t i = 0; i < schedulers_.size() && i < step_list.size(); ++i) {
      for (std::int64_t n = 0; n < step_list.get(i); ++n) schedulers_[i].scheduler->step();
      schedulers_[i].steps = step_list.get(i);
      schedulers_[i].intervals = interval_list.get(i);
    }
    torch::serialize::InputArchive optimizer_archive;
    archive.read("optimizer", optimizer_archive);
    config_.optimizer->load(optimizer_archive);
    torch::serialize::InputArchive precision_archive;
    archive.read("precision", precision_archive);
    precision_.load(precision_archive);
    for (const auto& [callback, key] : callback_state_keys()) {
      torch::serialize::InputArchive callback_archive;
      if (archive.try_read(key, callback_archive)) callback->load_state(callback_archive);
    }
    torch::Tensor rng, epoch_start_rng;
    archive.read("rng/cpu", rng, /*is_buffer=*/true);
    archive.read("rng/cpu_epoch_start", epoch_start_rng, /*is_buffer=*/true);
    rng = rng.to(torch::kCPU);
    epoch_start_rng = epoch_start_rng.to(torch::kCPU);
    state_.current_epoch = epoch;
    if (at_epoch_end) {
      // Saved by an epoch-end hook: the rest of that epoch's end is the epoch-interval scheduler step.
      step_schedulers(SchedulerInterval::epoch);
      state_.current_epoch = epoch + 1;
      detail::set_cpu_rng_state(rng);
    } else if (batches_done > 0) {
      resume_ = {batches_done, epoch_start_rng, rng};
    } else {
      detail::set_cpu_rng_state(rng);
    }
    resume_point_ = {state_.current_epoch, batches_done, false};
  }

  TrainerOptions options_;
  DeviceSelection selection_{};
  detail::StrategyRuntime<Strategy> strategy_{};
  Precision precision_{};
  detail::CallbackList callbacks_{};
  std::vector<std::shared_ptr<Logger>> loggers_{};
  detail::MetricStore metrics_{};
  detail::TrainStepGraph graph_{};
  TrainerState state_{};
  StepContext context_{state_};
  OptimizerConfig config_{};
  std::vector<SchedulerSlot> schedulers_{};
  std::optional<std::int64_t> train_limit_{};
  std::map<std::string, double> last_eval_metrics_{};
  std::string stop_reason_{};
  ResumePoint resume_point_{};
  ResumeState resume_{};
  bool interrupted_ = false;
  std::vector<ModelCheckpoint> deferred_checkpoints_{};
  torch::Tensor epoch_start_rng_{};
};

}  // namespace volt

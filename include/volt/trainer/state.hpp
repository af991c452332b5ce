/// \file
/// The Trainer's state (Lightning's trainer/states.py): what the Trainer is doing (volt::Stage), the state
/// callbacks and model hooks see (volt::TrainerState), and where a checkpoint resumes (detail::ResumePoint).
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/loggers/logger.hpp>
#include <volt/trainer/connectors/logger_connector.hpp>

#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace volt {

class Profiler;

namespace detail {
class Optimization;
}  // namespace detail

/// What the Trainer is doing (Lightning's TrainerFn plus the sanity check).
enum class Stage { none, fitting, sanity_checking, validating, testing, predicting };

/// The Trainer's state as callbacks and model hooks see it. Owned by the Trainer; valid during its calls.
struct TrainerState {
  /// volt::Stage, for callbacks written against a template state type (`State::Stage::fitting`).
  using Stage = volt::Stage;

  /// What the Trainer is running now (fit, the sanity check, validate, test, predict).
  Stage stage = Stage::none;
  /// The epoch being trained, counted from 0 (Lightning's trainer.current_epoch).
  std::int64_t current_epoch = 0;
  /// Optimizer steps taken (skipped AMP steps included, as in Lightning).
  std::int64_t global_step = 0;
  /// Index of the batch being processed in the current epoch or evaluation run.
  std::int64_t batch_idx = 0;
  /// Training batches per epoch after limit_train_batches, once known (the first epoch may not know it).
  std::optional<std::int64_t> num_training_batches{};
  /// Validation batches per run after limit_val_batches, once known.
  std::optional<std::int64_t> num_val_batches{};
  /// Batches per optimizer step in the current epoch: TrainerOptions::accumulate_grad_batches, unless a
  /// callback changes it at an epoch's start (GradientAccumulationScheduler does).
  std::int64_t accumulate_grad_batches = 1;
  /// Set to true to stop training after the current step (EarlyStopping does).
  bool should_stop = false;
  /// Whether this process is global rank 0; callbacks that write files or print do so only there.
  bool is_global_zero = true;
  /// This process's rank among all processes (0 without a distributed strategy).
  int global_rank = 0;
  /// The number of processes training together (1 without a distributed strategy).
  int world_size = 1;
  /// The device this process trains on.
  torch::Device root_device{torch::kCPU};
  /// The Trainer's default_root_dir option (empty: the current folder).
  std::filesystem::path default_root_dir{};
  /// The Trainer's max_epochs option, as given (nullopt: not set).
  std::optional<std::int64_t> max_epochs{};
  /// The Trainer's max_steps option (-1: no limit).
  std::int64_t max_steps = -1;
  /// The Trainer's log_every_n_steps option: logged values reach the loggers when (global_step + 1) is a
  /// multiple of it (0: never during training).
  std::int64_t log_every_n_steps = 50;
  /// Whether the current fit validates (a validation loader was given and limit_val_batches > 0).
  bool has_validation = false;
  /// Whether a validation run (not the sanity check) has completed in the current fit.
  bool validation_has_run = false;
  /// Lightning's "validation runs at the end of each training epoch": val_check_interval 1.0, every epoch.
  bool validates_at_epoch_end = true;
  /// Whether the Trainer runs with fast_dev_run (checkpointing and early stopping then do nothing).
  bool fast_dev_run = false;
  /// The run's loggers (empty when logging is off).
  std::vector<Logger*> loggers{};
  /// The optimizers of the model being fitted.
  std::vector<torch::optim::Optimizer*> optimizers{};
  /// The model being fitted or evaluated.
  torch::nn::Module* model = nullptr;

  /// All metrics logged so far as numbers (reading them syncs with the device).
  const std::map<std::string, double, std::less<>>& callback_metrics() { return metrics_->callback_metrics(); }
  /// One metric, if it was logged.
  std::optional<double> metric(std::string_view key) { return metrics_->metric(key); }
  /// Values flagged prog_bar, for progress bars.
  std::vector<std::pair<std::string, double>> progress_bar_metrics() { return metrics_->progress_bar_values(); }
  /// Logs a value from a callback (as LightningModule.log does from a hook), with StepContext::log's
  /// defaults for the hook it is called from (an epoch value in the epoch-level hooks).
  void log(std::string_view name, double value, const LogOptions& options = {});
  /// Logs a tensor value from a callback; the value stays on the device until a logger or the progress bar
  /// reads it.
  void log(std::string_view name, const torch::Tensor& value, const LogOptions& options = {});
  /// Sets values in callback_metrics() directly, replacing those of the same names, without logging them
  /// (Lightning's `trainer.callback_metrics.update(...)`, which LearningRateMonitor does on every rank).
  void update_callback_metrics(const std::map<std::string, double>& values) {
    metrics_->update_callback_metrics(values);
  }
  /// Writes the metrics to every logger at the current global step (global rank zero only).
  void log_to_loggers(const std::map<std::string, double>& values) const;
  /// Saves a full checkpoint of the run to `path` (atomically). Set by the Trainer during fit.
  std::function<void(const std::filesystem::path& path, bool weights_only)> save_checkpoint{};
  /// False when the last save_checkpoint call failed and the failure was only logged
  /// (on_checkpoint_failure=warn): callbacks then keep the files they would have replaced.
  bool last_checkpoint_saved = true;
  /// True on every rank when `value` is true on any rank: a collective under a distributed strategy (every
  /// rank must call it at the same point, as Timer and ModelCheckpoint's train_time_interval do after each
  /// batch); `value` itself otherwise. Set by the Trainer during fit.
  std::function<bool(bool value)> decide_across_ranks{};
  /// The accelerator's device statistics for the root device (DeviceStatsMonitor).
  std::function<std::map<std::string, double>()> device_stats{};
  /// Runs training_step over one epoch of the training data (limit_train_batches applies), in training mode
  /// and without autograd: no backward pass, optimizer step, hooks or logged values. What
  /// StochasticWeightAveraging recomputes BatchNorm statistics with (torch.optim.swa_utils.update_bn). Set by
  /// the Trainer during fit under automatic optimization (empty otherwise, and after fit returns).
  std::function<void()> forward_training_epoch{};

  /// The first logger's folder, or default_root_dir when there is no logger.
  std::filesystem::path log_dir() const;

  /// \cond
  // Set by the Trainer.
  detail::MetricStore* metrics_ = nullptr;
  MetricPhase phase_ = MetricPhase::train;
  // The fit's optimizers and LR schedulers (Lightning's trainer.optimizers and trainer.lr_scheduler_configs),
  // for the callbacks that change the schedule (StochasticWeightAveraging swaps in SWALR).
  detail::Optimization* optimization_ = nullptr;
  // The Trainer's profiler (null: none); hooks and loop actions are timed only when it is set.
  Profiler* profiler_ = nullptr;
  /// \endcond
};

namespace detail {

/// What of a training batch's end is still to run once its step and on_train_batch_end are over: the
/// validation check (a checkpoint written in on_train_batch_end), the ReduceLROnPlateau schedulers of interval
/// step (one written in the hooks of the validation after the batch), or nothing.
enum class BatchEndPending : std::int64_t { validation_check = 0, schedulers = 1, none = 2 };

/// Where the training loop stands, as a checkpoint written now records it: the epoch, the batches of it done,
/// whether the epoch's end (its hooks) is under way, and what of the last batch's end is still to run.
struct ResumePoint {
  std::int64_t epoch = 0;
  std::int64_t batches_done = 0;
  bool at_epoch_end = false;
  BatchEndPending pending = BatchEndPending::none;
};

/// A resume in the middle of an epoch: the batches to skip and the CPU generator's states at the epoch's start
/// (to replay the loader's shuffling) and at the checkpoint (to continue from).
struct ResumeState {
  std::int64_t batches_done = 0;
  torch::Tensor epoch_start_rng;
  torch::Tensor rng;
  /// What of batch batches_done - 1's end the checkpoint was written before: the resumed epoch runs it before
  /// the next batch, as the uninterrupted run did.
  BatchEndPending pending = BatchEndPending::none;
};

}  // namespace detail
}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/trainer/impl/state.ipp>
#endif

/// \file
/// The logger connector (Lightning's trainer/connectors/logger_connector/): what `ctx.log(...)` records, how
/// values aggregate over an epoch (detail::MetricStore), and the run's loggers (detail::LoggerConnector: the
/// default CSVLogger, hyperparameters, step and epoch values, finalize).
///
/// The values reach callbacks, the progress bar and loggers. They stay tensors on the device until something
/// reads them (a logger flush every log_every_n_steps, the progress bar's refresh, an epoch end, a callback
/// asking), so logging adds no host-device sync per step.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/errors.hpp>
#include <volt/loggers/csv_logger.hpp>
#include <volt/loggers/logger.hpp>
#include <volt/trainer/log_options.hpp>

#include <torch/torch.h>

#include <concepts>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace volt {

namespace detail {

struct MetricEntry {
  std::string name;
  MetricPhase phase;
  bool prog_bar;
  bool on_step;
  bool on_epoch;
  bool to_logger;
  Reduce reduce;
  torch::Tensor last;       // latest step value, detached
  torch::Tensor aggregate;  // epoch reduction so far (float32), detached
  std::int64_t count = 0;
  bool logged_since_flush = false;
};

/// A ctx.log(...) call made while a training step was captured in a CUDA graph: the value is a tensor of the
/// graph, rewritten by every replay, and the call is repeated after each replay.
struct RecordedLog {
  std::string name;
  torch::Tensor value;
  LogOptions options;
  MetricPhase phase;
};

/// Storage for logged metrics; owned by the Trainer, written through StepContext.
class MetricStore {
 public:
  /// While `sink` is set, log() appends its calls to `*sink` and records nothing else (a CUDA graph capture
  /// must not launch the aggregation's kernels); nullptr resumes normal logging.
  void record_into(std::vector<RecordedLog>* sink) noexcept { recording_ = sink; }

  /// Repeats recorded calls (after a replay of the graph they were captured in).
  void replay(const std::vector<RecordedLog>& calls);

  void log(std::string_view name, const torch::Tensor& value, const LogOptions& options, MetricPhase phase);

  void log(std::string_view name, double value, const LogOptions& options, MetricPhase phase);

  /// Step values logged since the last call, under their logger keys ("name" or "name_step"); reading them
  /// syncs with the device.
  std::map<std::string, double> take_step_values_for_logger();

  /// Ends the epoch of `phase`: reduces the epoch values into the callback metrics and returns those meant
  /// for the loggers ("name" or "name_epoch"). Resets the phase's accumulators.
  /// `across_ranks`, when given, combines each reduction kind's epoch values with the other ranks' (a
  /// distributed run: every rank logs the same names in the same order); it is called once per kind in use.
  std::map<std::string, double> end_epoch(
      MetricPhase phase, const std::function<void(std::vector<double>&, Reduce)>& across_ranks = {});

  /// While an epoch-level hook (on_train_epoch_end, on_validation_start, ...) named `hook` runs: log() then
  /// defaults to on_step=false, on_epoch=true and refuses on_step=true or on_epoch=false with Lightning's
  /// message. An empty name ends it.
  void set_epoch_hook(std::string_view hook) noexcept { epoch_hook_ = hook; }
  /// The epoch-level hook running now (empty: none).
  std::string_view epoch_hook() const noexcept { return epoch_hook_; }

  /// Whether a value of `phase` was logged for its epoch since the phase's last end_epoch (e.g. in a hook
  /// that runs after the epoch's values were reduced).
  bool has_epoch_values(MetricPhase phase) const;

  /// Brings the latest step values into the callback metrics (syncs) and returns them all.
  const std::map<std::string, double, std::less<>>& callback_metrics();

  std::optional<double> metric(std::string_view key);

  /// Values for the progress bar: step values while an epoch runs, epoch values of earlier phases.
  std::vector<std::pair<std::string, double>> progress_bar_values();

  /// Puts `metrics` (from a checkpoint) into the callback metrics, as they were when it was written; values
  /// logged since are kept.
  void restore_callback_metrics(const std::map<std::string, double, std::less<>>& metrics);

  /// Sets `values` in the callback metrics, replacing values of the same names, without logging them (a
  /// callback writing trainer.callback_metrics directly, as Lightning's LearningRateMonitor does).
  void update_callback_metrics(const std::map<std::string, double>& values);

  /// Forgets the values of one phase (e.g. after the sanity check, whose metrics Lightning discards).
  void discard(MetricPhase phase);

  void clear();

 private:
  /// Puts the latest step value under its callback key: "name" (step only) or "name_step" (step and epoch,
  /// where "name" holds the epoch value once the epoch ends).
  void publish_step_value(const MetricEntry& entry);

  MetricEntry* find(std::string_view name, MetricPhase phase);

  std::vector<MetricEntry> entries_;
  std::map<std::string, double, std::less<>> callback_metrics_;
  std::vector<RecordedLog>* recording_ = nullptr;
  std::string_view epoch_hook_{};
};

/// Marks the metric store as inside the epoch-level hook `hook` for the scope's lifetime (see
/// MetricStore::set_epoch_hook); the previous mark comes back at the end.
class EpochHookScope {
 public:
  /// Marks `store` (nothing when null).
  EpochHookScope(MetricStore* store, std::string_view hook) noexcept;
  ~EpochHookScope();
  EpochHookScope(const EpochHookScope&) = delete;
  EpochHookScope& operator=(const EpochHookScope&) = delete;

 private:
  MetricStore* store_;
  std::string_view previous_{};
};

/// A std::shared_ptr (or similar) to a volt::Logger.
template <class T>
concept logger_pointer = requires { typename T::element_type; } && std::derived_from<typename T::element_type, Logger>;

/// The run's loggers and the metric store (Lightning's LoggerConnector). Loggers are called on global rank
/// zero only.
class LoggerConnector {
 public:
  /// Loggers given without a save_dir write under `default_root_dir`, as Lightning's do.
  explicit LoggerConnector(std::filesystem::path default_root_dir = {}) : default_root_dir_(std::move(default_root_dir)) {}

  /// Adds a logger given by value (a type derived from volt::Logger) or by shared pointer, or the loggers of a
  /// list chosen at run time (`std::vector<std::shared_ptr<volt::Logger>>`, Lightning's `logger=[...]`: an
  /// empty list means no logger, not the default CSVLogger). Throws MisconfigurationError for a null entry.
  template <class L>
  void add(L&& logger) {
    using T = std::remove_cvref_t<L>;
    if constexpr (std::same_as<T, std::vector<std::shared_ptr<Logger>>>) {
      add_list(logger);
    } else if constexpr (std::derived_from<T, Logger>) {
      auto shared = std::make_shared<T>(std::forward<L>(logger));
      shared->set_default_save_dir(default_root_dir_);
      loggers_.push_back(std::move(shared));
    } else {
      static_assert(logger_pointer<T>, "volt: a logger is a type derived from volt::Logger or a shared pointer to one");
      logger->set_default_save_dir(default_root_dir_);
      loggers_.push_back(std::forward<L>(logger));
    }
  }

  /// The entries of a run-time logger list, in order (see add()).
  void add_list(const std::vector<std::shared_ptr<Logger>>& list);

  /// After the extras: the default CSVLogger when `enabled` and none was given (nor a list, even an empty
  /// one); no logger at all when not
  /// `enabled` or under fast_dev_run (Lightning's rules).
  void configure(bool enabled, bool fast_dev_run);

  /// Whether this process writes to the loggers (global rank zero).
  void set_global_zero(bool is_global_zero) { is_global_zero_ = is_global_zero; }

  /// The loggers.
  const std::vector<std::shared_ptr<Logger>>& loggers() const { return loggers_; }
  /// The loggers as the plain pointers callbacks see (TrainerState::loggers).
  std::vector<Logger*> pointers() const;
  /// The values logged through StepContext and TrainerState.
  MetricStore& metrics() { return metrics_; }

  /// The run's hyperparameters, once at fit start (rank zero, when there is a logger).
  void log_hyperparams(const std::map<std::string, std::string>& params);
  /// `values` with the "epoch" key added, at `step` (nothing when empty or off rank zero).
  void log_metrics(std::map<std::string, double> values, std::int64_t step, std::int64_t epoch);
  /// Writes what the loggers buffer.
  void save();
  /// The run ended with `status` ("success", "failed").
  void finalize(const std::string& status);

 private:
  std::filesystem::path default_root_dir_;
  std::vector<std::shared_ptr<Logger>> loggers_;
  MetricStore metrics_;
  bool is_global_zero_ = true;
  /// Whether a run-time logger list was given (an empty one turns the default CSVLogger off).
  bool list_given_ = false;
};

}  // namespace detail
}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/trainer/connectors/impl/logger_connector.ipp>
#endif

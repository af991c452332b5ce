/// \file
/// Callbacks: plain values whose member hooks the Trainer finds at compile time.
///
/// A callback is any copyable or movable type. It implements only the hooks it needs, each taking
/// `volt::TrainerState&` first; a hook that returns bool asks the Trainer to stop when it returns true.
/// Hooks it does not define cost nothing: the Trainer keeps, per hook, a list of just the callbacks that
/// define it. Callbacks run on every rank; those that write files check `state.is_global_zero`.
///
/// ```
///   struct PrintEpochs {
///     void on_train_epoch_end(volt::TrainerState& state) { std::cout << state.current_epoch << '\n'; }
///   };
///   volt::Trainer<> trainer({.max_epochs = 3}, PrintEpochs{});
/// ```
///
/// The hooks a callback may define, with the arguments the Trainer passes (`S` is `volt::TrainerState&`).
/// Each runs where Lightning runs the callback hook of the same name:
///
/// ```
///   setup(S)  teardown(S)  on_fit_start(S)  on_fit_end(S)  on_sanity_check_start(S)  on_sanity_check_end(S)
///   on_train_start(S)  on_train_end(S)  on_train_epoch_start(S)  on_train_epoch_end(S)
///   on_train_batch_start(S, std::int64_t batch_idx)
///   on_train_batch_end(S, const torch::Tensor& loss, std::int64_t batch_idx)
///   on_validation_start(S)  on_validation_end(S)  on_validation_epoch_start(S)  on_validation_epoch_end(S)
///   on_validation_batch_end(S, std::int64_t batch_idx)
///   on_test_start(S)  on_test_end(S)  on_test_epoch_end(S)  on_test_batch_end(S, std::int64_t batch_idx)
///   on_before_backward(S, const torch::Tensor& loss)  on_after_backward(S)
///   on_before_optimizer_step(S, torch::optim::Optimizer&)  on_before_zero_grad(S)
///   on_exception(S, const std::exception_ptr&)
///   save_state(torch::serialize::OutputArchive&) const    load_state(torch::serialize::InputArchive&)
/// ```
///
/// save_state and load_state store the callback's own state in checkpoints. A hook may throw: the exception
/// reaches the caller of fit() with the epoch and batch index added to its message, after on_exception and
/// teardown ran (see volt::Trainer::fit).
#pragma once

#include <volt/loggers/logger.hpp>
#include <volt/trainer/metrics.hpp>

#include <torch/torch.h>

#include <array>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace volt {

/// What the Trainer is doing (Lightning's TrainerFn plus the sanity check).
enum class Stage { none, fitting, sanity_checking, validating, testing, predicting };

/// The Trainer's state as callbacks and model hooks see it. Owned by the Trainer; valid during its calls.
struct TrainerState {
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
  /// Logs a value from a callback (as LightningModule.log does from a hook).
  void log(std::string_view name, double value, const LogOptions& options = {}) {
    metrics_->log(name, value, options, phase_);
  }
  /// Logs a tensor value from a callback; the value stays on the device until a logger or the progress bar
  /// reads it.
  void log(std::string_view name, const torch::Tensor& value, const LogOptions& options = {}) {
    metrics_->log(name, value, options, phase_);
  }
  /// Writes the metrics to every logger at the current global step (global rank zero only).
  void log_to_loggers(const std::map<std::string, double>& values) const {
    if (!is_global_zero) return;
    for (Logger* logger : loggers) logger->log_metrics(values, global_step);
  }
  /// Saves a full checkpoint of the run to `path` (atomically). Set by the Trainer during fit.
  std::function<void(const std::filesystem::path& path, bool weights_only)> save_checkpoint{};
  /// False when the last save_checkpoint call failed and the failure was only logged
  /// (on_checkpoint_failure=warn): callbacks then keep the files they would have replaced.
  bool last_checkpoint_saved = true;
  /// The accelerator's device statistics for the root device (DeviceStatsMonitor).
  std::function<std::map<std::string, double>()> device_stats{};

  /// The first logger's folder, or default_root_dir when there is no logger.
  std::filesystem::path log_dir() const {
    return loggers.empty() ? (default_root_dir.empty() ? std::filesystem::path(".") : default_root_dir)
                           : loggers.front()->log_dir();
  }

  /// \cond
  // Set by the Trainer.
  detail::MetricStore* metrics_ = nullptr;
  MetricPhase phase_ = MetricPhase::train;
  /// \endcond
};

namespace detail {

/// Every hook a callback may define. The enumerator order is the storage order of the Trainer's lists.
enum class Hook : std::size_t {
  setup, teardown, on_fit_start, on_fit_end, on_sanity_check_start, on_sanity_check_end, on_train_start,
  on_train_end, on_train_epoch_start, on_train_epoch_end, on_train_batch_start, on_train_batch_end,
  on_validation_start, on_validation_end, on_validation_epoch_start, on_validation_epoch_end,
  on_validation_batch_end, on_test_start, on_test_end, on_test_epoch_end, on_test_batch_end, on_before_backward,
  on_after_backward, on_before_optimizer_step, on_before_zero_grad, on_exception, save_state, load_state,
  count_
};
inline constexpr std::size_t hook_count = static_cast<std::size_t>(Hook::count_);

/// Calls a hook if `callback` has it; a bool result of true requests a stop.
#define VOLT_DETAIL_CALL_HOOK(hook, ...)                                                   \
  if constexpr (requires { callback.hook(__VA_ARGS__); }) {                                \
    if constexpr (std::is_same_v<decltype(callback.hook(__VA_ARGS__)), bool>) {            \
      if (callback.hook(__VA_ARGS__)) state.should_stop = true;                           \
    } else {                                                                               \
      callback.hook(__VA_ARGS__);                                                          \
    }                                                                                      \
  }

/// Type-erased callback: one virtual function per hook, and a record of which hooks the type defines.
class AnyCallback {
 public:
  virtual ~AnyCallback() = default;
  virtual bool has(Hook hook) const = 0;
  virtual std::string_view type_name() const = 0;
  virtual void* get(const std::type_info& type) = 0;

  virtual void run(Hook hook, TrainerState& state) = 0;
  virtual void run_batch_end(Hook hook, TrainerState& state, const torch::Tensor& loss, std::int64_t batch_idx) = 0;
  virtual void run_batch_start(TrainerState& state, std::int64_t batch_idx) = 0;
  virtual void run_before_backward(TrainerState& state, const torch::Tensor& loss) = 0;
  virtual void run_before_optimizer_step(TrainerState& state, torch::optim::Optimizer& optimizer) = 0;
  virtual void run_exception(TrainerState& state, const std::exception_ptr& error) = 0;
  virtual void save_state(torch::serialize::OutputArchive& archive) const = 0;
  virtual void load_state(torch::serialize::InputArchive& archive) = 0;
};

template <class C>
class CallbackModel final : public AnyCallback {
 public:
  explicit CallbackModel(C callback) : callback_(std::move(callback)) {}

  bool has(Hook hook) const override { return defined()[static_cast<std::size_t>(hook)]; }
  std::string_view type_name() const override { return typeid(C).name(); }
  void* get(const std::type_info& type) override { return type == typeid(C) ? &callback_ : nullptr; }

  void run(Hook hook, TrainerState& state) override {
    C& callback = callback_;
    switch (hook) {
      case Hook::setup: VOLT_DETAIL_CALL_HOOK(setup, state) break;
      case Hook::teardown: VOLT_DETAIL_CALL_HOOK(teardown, state) break;
      case Hook::on_fit_start: VOLT_DETAIL_CALL_HOOK(on_fit_start, state) break;
      case Hook::on_fit_end: VOLT_DETAIL_CALL_HOOK(on_fit_end, state) break;
      case Hook::on_sanity_check_start: VOLT_DETAIL_CALL_HOOK(on_sanity_check_start, state) break;
      case Hook::on_sanity_check_end: VOLT_DETAIL_CALL_HOOK(on_sanity_check_end, state) break;
      case Hook::on_train_start: VOLT_DETAIL_CALL_HOOK(on_train_start, state) break;
      case Hook::on_train_end: VOLT_DETAIL_CALL_HOOK(on_train_end, state) break;
      case Hook::on_train_epoch_start: VOLT_DETAIL_CALL_HOOK(on_train_epoch_start, state) break;
      case Hook::on_train_epoch_end: VOLT_DETAIL_CALL_HOOK(on_train_epoch_end, state) break;
      case Hook::on_validation_start: VOLT_DETAIL_CALL_HOOK(on_validation_start, state) break;
      case Hook::on_validation_end: VOLT_DETAIL_CALL_HOOK(on_validation_end, state) break;
      case Hook::on_validation_epoch_start: VOLT_DETAIL_CALL_HOOK(on_validation_epoch_start, state) break;
      case Hook::on_validation_epoch_end: VOLT_DETAIL_CALL_HOOK(on_validation_epoch_end, state) break;
      case Hook::on_test_start: VOLT_DETAIL_CALL_HOOK(on_test_start, state) break;
      case Hook::on_test_end: VOLT_DETAIL_CALL_HOOK(on_test_end, state) break;
      case Hook::on_test_epoch_end: VOLT_DETAIL_CALL_HOOK(on_test_epoch_end, state) break;
      case Hook::on_after_backward: VOLT_DETAIL_CALL_HOOK(on_after_backward, state) break;
      case Hook::on_before_zero_grad: VOLT_DETAIL_CALL_HOOK(on_before_zero_grad, state) break;
      default: break;
    }
  }
  void run_batch_end(Hook hook, TrainerState& state, const torch::Tensor& loss, std::int64_t batch_idx) override {
    C& callback = callback_;
    if (hook == Hook::on_train_batch_end) {
      VOLT_DETAIL_CALL_HOOK(on_train_batch_end, state, loss, batch_idx)
    } else if (hook == Hook::on_validation_batch_end) {
      VOLT_DETAIL_CALL_HOOK(on_validation_batch_end, state, batch_idx)
    } else if (hook == Hook::on_test_batch_end) {
      VOLT_DETAIL_CALL_HOOK(on_test_batch_end, state, batch_idx)
    }
  }
  void run_batch_start(TrainerState& state, std::int64_t batch_idx) override {
    C& callback = callback_;
    VOLT_DETAIL_CALL_HOOK(on_train_batch_start, state, batch_idx)
  }
  void run_before_backward(TrainerState& state, const torch::Tensor& loss) override {
    C& callback = callback_;
    VOLT_DETAIL_CALL_HOOK(on_before_backward, state, loss)
  }
  void run_before_optimizer_step(TrainerState& state, torch::optim::Optimizer& optimizer) override {
    C& callback = callback_;
    VOLT_DETAIL_CALL_HOOK(on_before_optimizer_step, state, optimizer)
  }
  void run_exception(TrainerState& state, const std::exception_ptr& error) override {
    C& callback = callback_;
    VOLT_DETAIL_CALL_HOOK(on_exception, state, error)
  }
  void save_state(torch::serialize::OutputArchive& archive) const override {
    if constexpr (requires(const C& c) { c.save_state(archive); }) callback_.save_state(archive);
  }
  void load_state(torch::serialize::InputArchive& archive) override {
    if constexpr (requires(C& c) { c.load_state(archive); }) callback_.load_state(archive);
  }

 private:
  static const std::array<bool, hook_count>& defined() {
    static const std::array<bool, hook_count> table = [] {
      std::array<bool, hook_count> t{};
      using S = TrainerState&;
      auto set = [&t](Hook hook, bool value) { t[static_cast<std::size_t>(hook)] = value; };
      set(Hook::setup, requires(C c, S s) { c.setup(s); });
      set(Hook::teardown, requires(C c, S s) { c.teardown(s); });
      set(Hook::on_fit_start, requires(C c, S s) { c.on_fit_start(s); });
      set(Hook::on_fit_end, requires(C c, S s) { c.on_fit_end(s); });
      set(Hook::on_sanity_check_start, requires(C c, S s) { c.on_sanity_check_start(s); });
      set(Hook::on_sanity_check_end, requires(C c, S s) { c.on_sanity_check_end(s); });
      set(Hook::on_train_start, requires(C c, S s) { c.on_train_start(s); });
      set(Hook::on_train_end, requires(C c, S s) { c.on_train_end(s); });
      set(Hook::on_train_epoch_start, requires(C c, S s) { c.on_train_epoch_start(s); });
      set(Hook::on_train_epoch_end, requires(C c, S s) { c.on_train_epoch_end(s); });
      set(Hook::on_train_batch_start, requires(C c, S s) { c.on_train_batch_start(s, std::int64_t{}); });
      set(Hook::on_train_batch_end,
          requires(C c, S s, const torch::Tensor& l) { c.on_train_batch_end(s, l, std::int64_t{}); });
      set(Hook::on_validation_start, requires(C c, S s) { c.on_validation_start(s); });
      set(Hook::on_validation_end, requires(C c, S s) { c.on_validation_end(s); });
      set(Hook::on_validation_epoch_start, requires(C c, S s) { c.on_validation_epoch_start(s); });
      set(Hook::on_validation_epoch_end, requires(C c, S s) { c.on_validation_epoch_end(s); });
      set(Hook::on_validation_batch_end, requires(C c, S s) { c.on_validation_batch_end(s, std::int64_t{}); });
      set(Hook::on_test_start, requires(C c, S s) { c.on_test_start(s); });
      set(Hook::on_test_end, requires(C c, S s) { c.on_test_end(s); });
      set(Hook::on_test_epoch_end, requires(C c, S s) { c.on_test_epoch_end(s); });
      set(Hook::on_test_batch_end, requires(C c, S s) { c.on_test_batch_end(s, std::int64_t{}); });
      set(Hook::on_before_backward, requires(C c, S s, const torch::Tensor& l) { c.on_before_backward(s, l); });
      set(Hook::on_after_backward, requires(C c, S s) { c.on_after_backward(s); });
      set(Hook::on_before_optimizer_step,
          requires(C c, S s, torch::optim::Optimizer& o) { c.on_before_optimizer_step(s, o); });
      set(Hook::on_before_zero_grad, requires(C c, S s) { c.on_before_zero_grad(s); });
      set(Hook::on_exception, requires(C c, S s, const std::exception_ptr& e) { c.on_exception(s, e); });
      set(Hook::save_state, requires(const C c, torch::serialize::OutputArchive& a) { c.save_state(a); });
      set(Hook::load_state, requires(C c, torch::serialize::InputArchive& a) { c.load_state(a); });
      return t;
    }();
    return table;
  }

  C callback_;
};

#undef VOLT_DETAIL_CALL_HOOK

/// The Trainer's callbacks, with one list per hook of just the callbacks that define it.
class CallbackList {
 public:
  template <class C>
  void add(C callback) {
    auto model = std::make_unique<CallbackModel<std::remove_cvref_t<C>>>(std::move(callback));
    for (std::size_t hook = 0; hook < hook_count; ++hook) {
      if (model->has(static_cast<Hook>(hook))) by_hook_[hook].push_back(model.get());
    }
    all_.push_back(std::move(model));
  }

  /// The first callback of type C, or nullptr.
  template <class C>
  C* find() {
    for (auto& callback : all_) {
      if (void* found = callback->get(typeid(C))) return static_cast<C*>(found);
    }
    return nullptr;
  }
  template <class C>
  std::size_t count() const {
    std::size_t n = 0;
    for (const auto& callback : all_) n += callback->get(typeid(C)) != nullptr;
    return n;
  }

  const std::vector<AnyCallback*>& with(Hook hook) const { return by_hook_[static_cast<std::size_t>(hook)]; }

  void run(Hook hook, TrainerState& state) const {
    for (AnyCallback* callback : with(hook)) callback->run(hook, state);
  }
  const std::vector<std::unique_ptr<AnyCallback>>& all() const { return all_; }

 private:
  std::vector<std::unique_ptr<AnyCallback>> all_;
  std::array<std::vector<AnyCallback*>, hook_count> by_hook_{};
};

}  // namespace detail
}  // namespace volt

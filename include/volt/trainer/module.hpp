/// \file
/// The contract between the Trainer and a user's model, as C++20 concepts, and volt::OptimizerConfig.
///
/// No base class: a model is a torch::nn::Module (held by std::shared_ptr or a TORCH_MODULE holder) with the
/// members below, found at compile time.
///
/// ```
/// torch::Tensor training_step(Batch& batch, int64_t batch_idx, volt::StepContext& ctx);  // required
/// auto configure_optimizers();       // required: std::shared_ptr<SomeOptimizer>, volt::OptimizerConfig,
///                                    // or (several optimizers) a std::vector of either
/// static constexpr bool automatic_optimization = false;        // optional: manual optimization
/// void validation_step(Batch&, int64_t, volt::StepContext&);   // optional, needed to validate
/// void test_step(Batch&, int64_t, volt::StepContext&);         // optional, needed to test
/// auto predict_step(Batch&, int64_t);                           // optional, needed to predict
/// ```
///
/// batch_idx and ctx may be left out of any step's parameters.
///
/// **Logging.** `ctx.log(name, value, {...})` (volt::StepContext::log, Lightning's `self.log`) records a
/// metric from any step or hook that receives the context: in training_step a step value by default
/// (`on_step=true, on_epoch=false`), in validation_step and test_step the epoch mean (`on_step=false,
/// on_epoch=true`), and in the epoch-level hooks (on_train_start, on_train_epoch_start/end,
/// on_validation_start, on_validation_epoch_start/end and the test ones) an epoch value of that epoch only:
/// `on_step=true` or `on_epoch=false` there throws volt::MisconfigurationError with Lightning's message. The
/// values reach the loggers (a step's row every log_every_n_steps optimizer steps, after on_train_batch_end;
/// the epoch's row after its epoch-end hooks), the progress bar (`prog_bar`) and callbacks
/// (TrainerState::callback_metrics, as ModelCheckpoint and EarlyStopping monitor them).
///
/// **Hyperparameters.** A model may define `std::map<std::string, std::string> hparams()` (Lightning's
/// `self.hparams`): at the start of fit the Trainer sends it, with the accelerator, precision and strategy
/// added, to every logger's log_hyperparams (CSVLogger writes hparams.yaml), on global rank zero.
///
/// **Hooks** (Lightning's ModelHooks; the full list is the owner column of volt/callbacks/hooks.hpp). Each
/// takes the arguments below, optionally followed by `volt::StepContext& ctx`, or only the context, or nothing;
/// the model's hook runs right after the callbacks' hook of the same name, as in Lightning:
///
/// ```
/// void on_fit_start();  void on_fit_end();  void on_train_start();  void on_train_end();
/// void on_train_epoch_start();  void on_train_epoch_end();
/// void on_validation_start();  void on_validation_end();
/// void on_validation_epoch_start();  void on_validation_epoch_end();   // and the on_test_* ones
/// void on_train_batch_start(const Batch& batch, int64_t batch_idx);  // or returning an integer: -1 skips
///                                                                     // the rest of the epoch (Lightning's)
/// void on_train_batch_end(const torch::Tensor& loss, const Batch& batch, int64_t batch_idx);
/// void on_validation_batch_start(const Batch& batch, int64_t batch_idx);   // and on_test_batch_start
/// void on_validation_batch_end(const Batch& batch, int64_t batch_idx);     // and on_test_batch_end
/// void on_before_zero_grad(torch::optim::Optimizer& optimizer);      // at the start of each accumulation window
/// void on_before_backward(const torch::Tensor& loss);                 // the (scaled) loss backward() gets
/// void on_after_backward();
/// void on_before_optimizer_step(torch::optim::Optimizer& optimizer); // gradients unscaled, not yet clipped
/// ```
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/profilers/profiler.hpp>
#include <volt/trainer/step_context.hpp>

#include <torch/torch.h>

#include <concepts>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace volt {

/// When an LR scheduler steps: after every optimizer step, or after every training epoch (default).
enum class SchedulerInterval {
  /// After every training batch that ends an accumulation window (once global_step has advanced, skipped AMP
  /// steps included); `frequency` counts the epoch's batches, as Lightning's does (batch_idx + 1).
  step,
  /// At the end of every training epoch, after validation and on_train_epoch_end; `frequency` counts epochs
  /// (current_epoch + 1).
  epoch,
};

/// One LR scheduler with when it steps (Lightning's lr_scheduler_config), for OptimizerConfig::lr_schedulers.
struct LRSchedulerConfig {
  /// The scheduler; required (fit() throws c10::Error when it is null).
  std::shared_ptr<torch::optim::LRScheduler> scheduler;
  /// When it steps (Lightning's "interval").
  SchedulerInterval interval = SchedulerInterval::epoch;
  /// Step it when the interval's count is a multiple of `frequency` (Lightning's "frequency"): the epoch's
  /// batch index + 1 for `step`, the epoch + 1 for `epoch`; must be >= 1.
  std::int64_t frequency = 1;
  /// A name for LearningRateMonitor and messages (Lightning's "name"); empty: none given.
  std::string name{};
  /// The logged metric a volt::optim::ReduceLROnPlateau steps with (Lightning's "monitor"; required for one).
  std::string monitor{};
  /// Whether a monitored metric that was not logged stops the fit (MisconfigurationError) or only skips the
  /// step with a warning (Lightning's "strict").
  bool strict = true;
};

/// What configure_optimizers() may return when it has LR schedulers (Lightning's dict form): one optimizer and
/// its schedulers. A std::vector of these configures several optimizers (manual optimization only).
/// fit() calls configure_optimizers() once per fit, after the model moved to its device, on every rank.
struct OptimizerConfig {
  /// The optimizer fit() steps; required (fit() throws c10::Error when it is null).
  std::shared_ptr<torch::optim::Optimizer> optimizer;
  /// An LR scheduler over `optimizer`; nullptr: none.
  std::shared_ptr<torch::optim::LRScheduler> lr_scheduler{};
  /// When lr_scheduler steps (Lightning's "interval").
  SchedulerInterval interval = SchedulerInterval::epoch;
  /// Step lr_scheduler every `frequency` intervals.
  std::int64_t frequency = 1;
  /// More schedulers over `optimizer`, each with its own config; they step after lr_scheduler, in this order.
  std::vector<LRSchedulerConfig> lr_schedulers{};
  /// The metric lr_scheduler steps with when it is a volt::optim::ReduceLROnPlateau (Lightning's "monitor").
  std::string monitor{};
};

namespace detail {

template <class T>
struct module_of;
template <class M>
struct module_of<std::shared_ptr<M>> {
  using type = M;
};
template <class T>
  requires requires { typename T::ContainedType; } && std::derived_from<T, torch::nn::ModuleHolder<typename T::ContainedType>>
struct module_of<T> {
  using type = typename T::ContainedType;
};

/// The model's module type from what the user passes to fit (std::shared_ptr<M> or a TORCH_MODULE holder).
template <class Holder>
using module_t = typename module_of<std::remove_cvref_t<Holder>>::type;

template <class Holder>
std::shared_ptr<module_t<Holder>> model_module(Holder& holder) {
  if constexpr (requires { holder.ptr(); }) {
    return holder.ptr();
  } else {
    return holder;
  }
}

// A step may take (batch, batch_idx, ctx), (batch, batch_idx) or (batch).
#define VOLT_DETAIL_STEP_CALLS(step)                                                                     \
  template <class M, class B>                                                                           \
  concept has_##step = requires(M& m, B& b, std::int64_t i, StepContext& c) { m.step(b, i, c); } ||     \
                       requires(M& m, B& b, std::int64_t i) { m.step(b, i); } ||                        \
                       requires(M& m, B& b) { m.step(b); };                                             \
  template <class M, class B>                                                                           \
  decltype(auto) invoke_##step(M& m, B& b, std::int64_t i, StepContext& c) {                            \
    if constexpr (requires { m.step(b, i, c); }) {                                                      \
      return m.step(b, i, c);                                                                           \
    } else if constexpr (requires { m.step(b, i); }) {                                                  \
      return m.step(b, i);                                                                              \
    } else {                                                                                            \
      return m.step(b);                                                                                 \
    }                                                                                                   \
  }                                                                                                    \
  template <class M, class B>                                                                           \
  decltype(auto) call_##step(M& m, B& b, std::int64_t i, StepContext& c) {                              \
    if (c.trainer().profiler_) [[unlikely]] {                                                           \
      ProfileScope scope(c.trainer().profiler_, model_action<M>(#step));                                \
      return invoke_##step(m, b, i, c);                                                                 \
    }                                                                                                   \
    return invoke_##step(m, b, i, c);                                                                   \
  }
VOLT_DETAIL_STEP_CALLS(training_step)
VOLT_DETAIL_STEP_CALLS(validation_step)
VOLT_DETAIL_STEP_CALLS(test_step)
VOLT_DETAIL_STEP_CALLS(predict_step)
#undef VOLT_DETAIL_STEP_CALLS

template <class T>
concept optimizer_pointer =
    requires(T t) { typename T::element_type; } && std::derived_from<typename T::element_type, torch::optim::Optimizer>;

/// One optimizer's entry of configure_optimizers(): an optimizer pointer or an OptimizerConfig.
template <class T>
concept optimizer_entry = optimizer_pointer<T> || std::same_as<T, OptimizerConfig>;

template <class T>
struct is_optimizer_list : std::false_type {};
template <class T, class A>
struct is_optimizer_list<std::vector<T, A>> : std::bool_constant<optimizer_entry<T>> {};

template <class M>
using configure_optimizers_result = std::remove_cvref_t<decltype(std::declval<M&>().configure_optimizers())>;

template <class M>
concept has_configure_optimizers = requires(M& m) { m.configure_optimizers(); } &&
                                   (optimizer_entry<configure_optimizers_result<M>> ||
                                    is_optimizer_list<configure_optimizers_result<M>>::value);

/// Whether the model declares an `automatic_optimization` member at all.
template <class M>
concept declares_automatic_optimization = requires { &M::automatic_optimization; };

/// Lightning's `automatic_optimization`: true unless the model declares
/// `static constexpr bool automatic_optimization = false;` (checked by check_trainable()).
template <class M>
constexpr bool uses_automatic_optimization() {
  if constexpr (!declares_automatic_optimization<M>) {
    return true;
  } else if constexpr (std::is_member_object_pointer_v<decltype(&M::automatic_optimization)>) {
    return true;  // refused by check_trainable()
  } else {
    return static_cast<bool>(M::automatic_optimization);
  }
}

VOLT_INLINE OptimizerConfig optimizer_entry_config(OptimizerConfig config, std::size_t index);
template <optimizer_pointer P>
OptimizerConfig optimizer_entry_config(P pointer, std::size_t index) {
  TORCH_CHECK(pointer != nullptr, "volt: configure_optimizers() returned a null optimizer",
              index > 0 ? " (entry " + std::to_string(index) + ")" : std::string());
  return OptimizerConfig{std::move(pointer)};
}

/// What configure_optimizers() returned, as one OptimizerConfig per optimizer.
template <class M>
std::vector<OptimizerConfig> configure_optimizers(M& model) {
  auto result = model.configure_optimizers();
  std::vector<OptimizerConfig> configs;
  if constexpr (is_optimizer_list<decltype(result)>::value) {
    TORCH_CHECK(!result.empty(), "volt: configure_optimizers() returned an empty list of optimizers");
    for (auto& entry : result) configs.push_back(optimizer_entry_config(std::move(entry), configs.size()));
  } else {
    configs.push_back(optimizer_entry_config(std::move(result), 0));
  }
  return configs;
}

/// The model's static checks, each naming what is missing.
template <class M, class Batch>
constexpr void check_trainable() {
  static_assert(std::derived_from<M, torch::nn::Module>,
                "volt: the model must be a torch::nn::Module (pass a std::shared_ptr<YourModule> or a TORCH_MODULE holder)");
  static_assert(has_training_step<M, Batch>,
                "volt: the model has no `training_step` callable with this data's batch type: define "
                "`torch::Tensor training_step(const Batch& batch, int64_t batch_idx, volt::StepContext& ctx)` "
                "(batch_idx and ctx may be left out)");
  static_assert(has_configure_optimizers<M>,
                "volt: the model has no `configure_optimizers()` returning a std::shared_ptr to a torch::optim "
                "optimizer, a volt::OptimizerConfig, or a std::vector of either");
  if constexpr (declares_automatic_optimization<M>) {
    static_assert(!std::is_member_object_pointer_v<decltype(&M::automatic_optimization)> &&
                      std::is_same_v<std::remove_cv_t<std::remove_reference_t<decltype(M::automatic_optimization)>>, bool>,
                  "volt: `automatic_optimization` must be declared `static constexpr bool automatic_optimization = "
                  "false;` (a compile-time constant of the model's class, not a data member)");
  }
}

}  // namespace detail
}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/trainer/impl/module.ipp>
#endif

/// \file
/// volt::lr_find: Lightning's Tuner.lr_find, the learning-rate range test.
///
/// Train for up to num_training optimizer steps while the learning rate grows from min_lr to max_lr
/// (exponentially or linearly), record the smoothed loss of each step, stop early when it diverges, then
/// put the model and its optimizer back as they were. The suggestion is the learning rate where the loss
/// falls fastest.
///
/// ```
/// auto found = volt::lr_find<volt::CUDA, volt::SingleDevice, volt::BF16Autocast>({.devices = 1}, model, train);
/// found.write_svg("lr_find.svg");
/// if (auto lr = found.suggestion()) { /* model->lr is *lr already (update_attr) */ }
/// ```
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/errors.hpp>
#include <volt/core/log.hpp>
#include <volt/strategies/ddp.hpp>
#include <volt/trainer/options.hpp>
#include <volt/trainer/trainer.hpp>
#include <volt/tuner/detail/trial_options.hpp>
#include <volt/tuner/lr_finder_result.hpp>

#include <torch/torch.h>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace volt {

/// Options of the learning-rate finder, with Lightning's defaults (Tuner.lr_find).
struct LRFinderOptions {
  /// The first learning rate (> 0 in "exponential" mode, >= 0 in "linear").
  double min_lr = 1e-8;
  /// The last learning rate (> min_lr).
  double max_lr = 1.0;
  /// Optimizer steps of the sweep (>= 1).
  std::int64_t num_training = 100;
  /// "exponential" or "linear".
  std::string mode = "exponential";
  /// Stop when the smoothed loss exceeds this multiple of the best smoothed loss so far (> 0); std::nullopt
  /// never stops early.
  std::optional<double> early_stop_threshold = 4.0;
  /// After the restore, set the model's learning-rate member (`lr`, else `learning_rate`, any arithmetic
  /// member of the model or of what the model pointer points to) to the suggestion, as Lightning's
  /// update_attr does. lr_find refuses a model with neither member before it trains.
  bool update_attr = true;
};

/// The learning rate of optimizer step `step` (0-based) of the sweep, as Lightning's _ExponentialLR and
/// _LinearLR give it: min_lr at step 0, then min_lr * (max_lr / min_lr)^((step + 1) / num_training)
/// (exponential) or min_lr + (step + 1) / num_training * (max_lr - min_lr) (linear), so that step
/// num_training - 1 runs at max_lr. (Lightning's schedulers skip the ratio 1 / num_training: step 1 already
/// uses 2 / num_training.)
VOLT_INLINE double lr_finder_learning_rate(const LRFinderOptions& options, std::int64_t step);

/// Throws MisconfigurationError when `options` cannot describe a sweep, naming the value given and what
/// is allowed.
VOLT_INLINE void validate_lr_finder_options(const LRFinderOptions& options);

/// Lightning's _LRCallback loss rule: the running average avg = beta avg + (1 - beta) loss, debiased as
/// avg / (1 - beta^(global_step + 1)) with the step count after the optimizer step (so the first value is
/// divided by 1 - beta^2, as in Lightning), and the divergence test.
class LRFinderLossSmoother {
 public:
  /// `threshold`: LRFinderOptions::early_stop_threshold.
  explicit LRFinderLossSmoother(std::optional<double> threshold, double beta = 0.98) : threshold_(threshold), beta_(beta) {}

  /// Adds the loss of the step that made the step count `global_step`; returns whether the sweep should
  /// stop (the smoothed loss exceeds threshold times the best one, from the second step on). The smoothed
  /// loss is in smoothed().
  bool add(double loss, std::int64_t global_step);
  /// The last smoothed loss.
  double smoothed() const { return smoothed_; }

 private:
  std::optional<double> threshold_;
  double beta_;
  double avg_ = 0.0;
  double best_ = 0.0;
  double smoothed_ = 0.0;
};

namespace detail {

/// What the sweep's callback and lr_find share.
struct LRFinderRun {
  LRFinderOptions options;
  std::int64_t accumulate = 1;
  LRFinderLossSmoother smoother{options.early_stop_threshold};
  LRFinderResult result;
  torch::optim::Optimizer* optimizer = nullptr;
  std::string optimizer_state;  // the optimizer's state before the first step, serialized
  std::vector<std::unique_ptr<torch::optim::OptimizerOptions>> group_options;  // and its groups' options
  std::size_t optimizer_count = 0;
};

/// The callback that drives the sweep: sets each step's learning rate on every parameter group, records
/// it and the smoothed loss (on the last batch of each accumulation window, as Lightning), and stops the
/// fit on divergence.
struct LRFinderCallback {
  std::shared_ptr<LRFinderRun> run;

  template <class State>
  void on_train_batch_start(State& state, std::int64_t batch_idx) {
    if (run->optimizer == nullptr) {
      run->optimizer_count = state.optimizers.size();
      if (state.optimizers.size() != 1) {
        throw MisconfigurationError("`model.configure_optimizers()` returned " +
                                    std::to_string(state.optimizers.size()) +
                                    ", but learning rate finder only works with single optimizer");
      }
      run->optimizer = state.optimizers.front();
      std::ostringstream bytes;
      torch::serialize::OutputArchive archive;
      run->optimizer->save(archive);
      archive.save_to(bytes);
      run->optimizer_state = bytes.str();
      for (const auto& group : run->optimizer->param_groups()) run->group_options.push_back(group.options().clone());
    }
    if ((batch_idx + 1) % run->accumulate != 0) return;
    run->result.lrs.push_back(lr_finder_learning_rate(run->options, static_cast<std::int64_t>(run->result.losses.size())));
  }

  template <class State>
  void on_before_optimizer_step(State& /*state*/, torch::optim::Optimizer& optimizer) {
    if (run->result.lrs.empty()) return;
    for (auto& group : optimizer.param_groups()) group.options().set_lr(run->result.lrs.back());
  }

  template <class State>
  void on_train_batch_end(State& state, const torch::Tensor& loss, std::int64_t batch_idx) {
    if ((batch_idx + 1) % run->accumulate != 0) return;
    if (!loss.defined()) {
      run->result.losses.push_back(std::numeric_limits<double>::quiet_NaN());
      return;
    }
    const bool stop = run->smoother.add(loss.detach().to(torch::kCPU).to(torch::kDouble).item<double>(), state.global_step);
    run->result.losses.push_back(run->smoother.smoothed());
    if (stop) {
      run->result.stopped_early = true;
      state.should_stop = true;
    }
  }
};

/// The module behind `model` (a std::shared_ptr, a torch::nn::ModuleHolder, or the module itself).
template <class Model>
decltype(auto) lr_finder_module(Model& model) {
  if constexpr (requires { *model; }) {
    return (*model);
  } else {
    return (model);
  }
}

/// Whether `M` has an arithmetic `lr` member.
template <class M>
constexpr bool has_lr_member = requires(M& m) { requires std::is_arithmetic_v<std::remove_cvref_t<decltype(m.lr)>>; };
/// Whether `M` has an arithmetic `learning_rate` member.
template <class M>
constexpr bool has_learning_rate_member =
    requires(M& m) { requires std::is_arithmetic_v<std::remove_cvref_t<decltype(m.learning_rate)>>; };

/// Deep copies of a module's parameters and buffers, written back with restore().
class ModuleSnapshot {
 public:
  explicit ModuleSnapshot(torch::nn::Module& module);
  void restore();

 private:
  torch::nn::Module& module_;
  std::vector<torch::Tensor> parameters_, buffers_;
};

/// Puts the sweep's optimizer back as it was before its first step (state and parameter-group options).
VOLT_INLINE void restore_optimizer(LRFinderRun& run);

}  // namespace detail

/// Lightning's Tuner.lr_find with a `Trainer<Accelerator, Strategy, Precision>`. Fits `model` on
/// `train_data` (anything Trainer::fit takes; it is cycled if shorter than the sweep) for
/// options.num_training optimizer steps with `trainer_options`, minus what the sweep does not need (no
/// validation, sanity check, checkpoints, logger, progress bar, model summary or CUDA graph capture), while
/// a callback sets each step's learning rate (lr_finder_learning_rate) on the one optimizer that
/// configure_optimizers returns, records the smoothed losses and stops early on divergence. Afterwards
/// (also when the fit throws) the model's parameters and buffers and the optimizer's state and options are
/// put back bit for bit; gradients are cleared. With options.update_attr the model's `lr` (or
/// `learning_rate`) member is then set to the suggestion, if there is one. Logs Lightning's lines ("LR
/// finder stopped early after N steps due to diverging loss.", "Learning rate set to X").
/// Throws MisconfigurationError for bad options, for update_attr with a model without a learning-rate
/// member, and for several optimizers; with volt::DDP, std::invalid_argument before any process starts;
/// and what the Trainer throws. Under fast_dev_run it warns ("Skipping learning rate finder since
/// `fast_dev_run` is enabled.") and returns an empty result, as Lightning returns None.
template <class Accelerator, class Strategy, class Precision, class Model, class TrainData>
LRFinderResult lr_find(TrainerOptions trainer_options, Model& model, TrainData&& train_data,
                       const LRFinderOptions& options = {}) {
  if constexpr (std::is_same_v<Strategy, DDP>) {
    throw std::invalid_argument(
        "volt: lr_find runs on one device: use volt::SingleDevice for the search, then train with volt::DDP and "
        "the learning rate found.");
  }
  validate_lr_finder_options(options);
  auto& module = detail::lr_finder_module(model);
  using Module = std::remove_cvref_t<decltype(module)>;
  constexpr bool has_attr = detail::has_lr_member<Module> || detail::has_learning_rate_member<Module>;
  if (options.update_attr && !has_attr) {
    throw MisconfigurationError(
        "When using the learning rate finder, either `model` or `model.hparams` should have one of these fields: "
        "('lr', 'learning_rate'). (volt: give the model a `double lr` or `double learning_rate` member, or set "
        "LRFinderOptions::update_attr = false and apply result.suggestion() yourself.)");
  }
  LRFinderResult empty;
  empty.mode = options.mode;
  if (trainer_options.fast_dev_run > 0) {
    log::warn_rank_zero("Skipping learning rate finder since `fast_dev_run` is enabled.");
    return empty;
  }
  auto run = std::make_shared<detail::LRFinderRun>();
  run->options = options;
  run->smoother = LRFinderLossSmoother(options.early_stop_threshold);
  run->result.mode = options.mode;
  run->accumulate = trainer_options.accumulate_grad_batches;
  detail::make_trial_options(trainer_options, options.num_training);
  trainer_options.cuda_graphs = false;
  detail::ModuleSnapshot snapshot(static_cast<torch::nn::Module&>(module));
  // Declared outside the try: the optimizer it may own must outlive the restore.
  std::optional<Trainer<Accelerator, Strategy, Precision>> trainer;
  try {
    trainer.emplace(trainer_options, detail::LRFinderCallback{run});
    trainer->fit(model, std::forward<TrainData>(train_data));
    snapshot.restore();
    detail::restore_optimizer(*run);
  } catch (...) {
    snapshot.restore();
    detail::restore_optimizer(*run);
    throw;
  }
  const auto steps = static_cast<std::int64_t>(run->result.losses.size());
  if (steps != options.num_training) {
    log::info_rank_zero("LR finder stopped early after " + std::to_string(steps) + " steps due to diverging loss.");
  }
  if constexpr (has_attr) {
    if (options.update_attr) {
      if (const auto lr = run->result.suggestion()) {
        if constexpr (detail::has_lr_member<Module>) {
          module.lr = static_cast<std::remove_cvref_t<decltype(module.lr)>>(*lr);
        } else {
          module.learning_rate = static_cast<std::remove_cvref_t<decltype(module.learning_rate)>>(*lr);
        }
        char shortest[32];
        const auto end = std::to_chars(shortest, shortest + sizeof(shortest), *lr).ptr;
        log::info_rank_zero("Learning rate set to " + std::string(shortest, end));
      }
    }
  }
  return std::move(run->result);
}

}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/tuner/impl/lr_finder.ipp>
#endif

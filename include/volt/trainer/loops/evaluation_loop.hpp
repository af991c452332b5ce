/// \file
/// The evaluation loop (Lightning's loops/evaluation_loop.py): validation inside fit, the sanity check before
/// it, trainer.validate and trainer.test, as one loop parameterised by the stage. Each run: the start and
/// epoch-start hooks, the steps in eval mode without autograd (the batch-start hook, validation_step or
/// test_step, the batch-end hook), the epoch values (combined across ranks), the epoch-end and end hooks.
#pragma once

#include <volt/core/errors.hpp>
#include <volt/core/linkage.hpp>
#include <volt/core/range.hpp>
#include <volt/trainer/call.hpp>
#include <volt/trainer/connectors/data_connector.hpp>
#include <volt/trainer/module.hpp>
#include <volt/trainer/parts.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

namespace volt::detail {

/// Evaluation autograd mode: inference mode (when enabled) and no grad. InferenceMode(false) turns grad
/// mode on, so the NoGradGuard constructed after it is what keeps autograd off in both cases.
class EvalGuard {
 public:
  explicit EvalGuard(bool inference) : inference_(inference) {}

 private:
  c10::InferenceMode inference_;
  torch::NoGradGuard no_grad_;
};

/// The hooks, metric phase and limit of one kind of evaluation: validation, or test when `Testing`.
template <bool Testing>
struct EvaluationKind {
  static constexpr Hook start = Testing ? Hook::on_test_start : Hook::on_validation_start;
  static constexpr Hook epoch_start = Testing ? Hook::on_test_epoch_start : Hook::on_validation_epoch_start;
  static constexpr Hook batch_start = Testing ? Hook::on_test_batch_start : Hook::on_validation_batch_start;
  static constexpr Hook batch_end = Testing ? Hook::on_test_batch_end : Hook::on_validation_batch_end;
  static constexpr Hook epoch_end = Testing ? Hook::on_test_epoch_end : Hook::on_validation_epoch_end;
  static constexpr Hook end = Testing ? Hook::on_test_end : Hook::on_validation_end;
  static constexpr MetricPhase phase = Testing ? MetricPhase::test : MetricPhase::validation;
  static constexpr const char* limit_name = Testing ? "limit_test_batches" : "limit_val_batches";
  static constexpr const char* batch_name = Testing ? "test" : "validation";
  /// The profiler's action for fetching the next batch (Lightning's names).
  static constexpr const char* next_action = Testing ? "[_EvaluationLoop].test_next" : "[_EvaluationLoop].val_next";
  static const BatchAmount& limit(const TrainerOptions& options) {
    return Testing ? options.limit_test_batches : options.limit_val_batches;
  }
};

/// Runs evaluations and keeps the epoch values of the last one.
class EvaluationLoop {
 public:
  /// One evaluation of `data` under `stage` (fitting: validation inside fit; sanity_checking; validating;
  /// testing), over the kind's limit or `limit_override`. Inside fit the epoch values reach the loggers.
  template <class Parts, class M, class Data>
  void run(Parts& parts, M& module, Data& data, Stage stage, std::optional<std::int64_t> limit_override = {}) {
    if (stage == Stage::testing) {
      run_kind<true>(parts, module, data, stage, limit_override);
    } else {
      run_kind<false>(parts, module, data, stage, limit_override);
    }
  }

  /// The sanity check before fit's first epoch: num_sanity_val_steps batches, its values then discarded (as
  /// Lightning does).
  template <class Parts, class M, class Data>
  void sanity_check(Parts& parts, M& module, Data& data) {
    auto& state = parts.state;
    const Stage previous = state.stage;
    state.stage = Stage::sanity_checking;
    parts.callbacks.list().template run<Hook::on_sanity_check_start>(state);
    const std::int64_t steps = parts.options.num_sanity_val_steps;
    run(parts, module, data, Stage::sanity_checking,
        steps < 0 ? std::optional<std::int64_t>{} : std::optional<std::int64_t>{steps});
    parts.logger.metrics().discard(MetricPhase::validation);
    parts.callbacks.list().template run<Hook::on_sanity_check_end>(state);
    state.stage = previous;
  }

  /// trainer.validate and trainer.test: prepares the model, evaluates, logs the epoch values at the current
  /// global step and returns them. Throws Lightning's MisconfigurationError when the model has no step for
  /// the stage.
  template <class Parts, class Model, class Data>
  std::map<std::string, double> run_standalone(Parts& parts, Model& model, Data& data, Stage stage) {
    using M = module_t<Model>;
    using Batch = batch_t<Data>;
    if constexpr (!has_test_step<M, Batch>) {
      if (stage == Stage::testing) throw MisconfigurationError("No `test_step()` method defined to run `Trainer.test`.");
    }
    if constexpr (!has_validation_step<M, Batch>) {
      if (stage != Stage::testing) {
        throw MisconfigurationError("No `validation_step()` method defined to run `Trainer.validate`.");
      }
    }
    auto module = model_module(model);
    parts.prepare_module(*module);
    parts.logger.metrics().clear();
    parts.state.stage = stage;
    const auto& state = parts.state;  // profiler: set up for the stage, its report written when the stage ends
    ProfiledStage profiled(state.profiler_, stage == Stage::testing ? "test" : "validate",
                           state.world_size > 1 ? std::optional<int>(state.global_rank) : std::nullopt, state.log_dir());
    run(parts, *module, data, stage);
    parts.log_metrics(last_metrics_, parts.state.global_step);
    parts.logger.save();
    parts.state.stage = Stage::none;
    return last_metrics_;
  }

  /// The epoch values of the last run.
  const std::map<std::string, double>& last_metrics() const { return last_metrics_; }

  /// Under overfit_batches, the fixed order of a shuffling validation loader inside fit.
  OverfitOrder overfit_order{};

  /// Validation data from a loader factory inside fit (Lightning's evaluation_loop.setup_data): the loader is
  /// requested when none was, or reload_dataloaders_every_n_epochs epochs after the request that counts (one
  /// in the sanity check counts only in an epoch that validates); a fractional limit must select a batch.
  template <class Parts, class Data>
  void setup_data(Parts& parts, Data& data) {
    const auto& options = parts.options;
    const auto& state = parts.state;
    auto& source = loader_source(data);
    if (!reload_due(source, options.reload_dataloaders_every_n_epochs, state.current_epoch)) return;
    source.load(state.current_epoch);
    const auto every = options.check_val_every_n_epoch;
    const bool validating_epoch = !every || (state.current_epoch + 1) % *every == 0;
    source.count_load(state.stage != Stage::sanity_checking || validating_epoch);
    check_fraction(options.limit_val_batches, size_of(data), "val");
  }

 private:
  template <bool Testing, class Parts, class M, class Data>
  void run_kind(Parts& parts, M& module, Data& data, Stage stage, std::optional<std::int64_t> limit_override) {
    using Kind = EvaluationKind<Testing>;
    auto& state = parts.state;
    auto& callbacks = parts.callbacks.list();
    const Stage previous = state.stage;
    state.stage = stage;
    if constexpr (from_factory<Data>) {
      if (stage == Stage::fitting || stage == Stage::sanity_checking) setup_data(parts, data);
    }
    // The sanity check runs at most num_sanity_val_steps of the batches validation would run.
    auto limit = data_limit(parts.options, Kind::limit(parts.options), data, Kind::limit_name);
    if (limit_override) limit = limit ? std::min(*limit, *limit_override) : *limit_override;
    state.phase_ = Kind::phase;  // values logged in the start hooks belong to this evaluation
    call_hook<Kind::start>(module, parts.context, callbacks, state);
    call_hook<Kind::epoch_start>(module, parts.context, callbacks, state);
    evaluate<Kind>(parts, module, data, limit);
    auto values = parts.logger.metrics().end_epoch(Kind::phase, parts.ranks_reducer());
    call_hook<Kind::epoch_end>(module, parts.context, callbacks, state);
    end_values(parts, Kind::phase, stage, std::move(values));
    call_hook<Kind::end>(module, parts.context, callbacks, state);
    state.stage = previous;
  }

  /// After the epoch-end hooks: the values they logged are this evaluation's too (Lightning's
  /// update_eval_epoch_metrics runs after them); inside fit they reach the loggers.
  template <class Parts>
  void end_values(Parts& parts, MetricPhase phase, Stage stage, std::map<std::string, double> values);

  /// The kind's step over up to `limit` batches, in eval mode, without autograd.
  template <class Kind, class Parts, class M, class Data>
  void evaluate(Parts& parts, M& module, Data& data, std::optional<std::int64_t> limit) {
    auto& state = parts.state;
    const bool was_training = module.is_training();
    module.eval();
    state.phase_ = Kind::phase;
    EvalGuard guard(parts.options.inference_mode);
    std::int64_t batch_idx = 0;
    auto&& range = as_range(data);
    const bool fitting = state.stage == Stage::fitting || state.stage == Stage::sanity_checking;
    auto it = fitting ? overfit_order.begin(range, parts.options, "val") : std::begin(range);
    auto next = [&] {
      std::optional<ProfileScope> profiled;  // profiler: the loader's next batch
      if (state.profiler_) [[unlikely]] profiled.emplace(state.profiler_, Kind::next_action);
      ++it;
    };
    for (const auto end = std::end(range); it != end; next()) {
      if (limit && batch_idx >= *limit) break;
      try {
        auto batch = parts.prepare_batch(*it);
        using Batch = std::remove_cvref_t<decltype(batch)>;
        state.batch_idx = batch_idx;
        parts.callbacks.list().template run<Kind::batch_start>(state, batch_idx);
        ModelHook<Kind::batch_start>::call(module, parts.context, std::as_const(batch), batch_idx);
        {
          auto context = parts.precision.forward_context();
          if constexpr (Kind::phase == MetricPhase::test) {
            if constexpr (has_test_step<M, Batch>) call_test_step(module, batch, batch_idx, parts.context);
          } else {
            if constexpr (has_validation_step<M, Batch>) call_validation_step(module, batch, batch_idx, parts.context);
          }
        }
        parts.callbacks.list().template run<Kind::batch_end>(state, batch_idx);
        ModelHook<Kind::batch_end>::call(module, parts.context, std::as_const(batch), batch_idx);
      } catch (...) {
        rethrow_with_context(batch_context(state, Kind::batch_name, batch_idx));
      }
      ++batch_idx;
    }
    state.num_val_batches = batch_idx;
    if (was_training) module.train();
  }

  /// "epoch E, <kind> batch B", what an error in the batch is told with.
  static std::string batch_context(const TrainerState& state, const char* kind, std::int64_t batch_idx);

  std::map<std::string, double> last_metrics_{};
};

// Out of the class: with VOLT_SEPARATE_COMPILATION volt's policies get it from volt::compiled
// (volt/trainer/instantiations.hpp).
template <class Parts>
void EvaluationLoop::end_values(Parts& parts, MetricPhase phase, Stage stage, std::map<std::string, double> values) {
  auto& metrics = parts.logger.metrics();
  if (metrics.has_epoch_values(phase)) {
    for (auto& [key, value] : metrics.end_epoch(phase, parts.ranks_reducer())) values[key] = value;
  }
  if (stage == Stage::fitting) {
    parts.log_metrics(values, std::max<std::int64_t>(0, parts.state.global_step - 1));
    parts.state.validation_has_run = true;
  }
  last_metrics_ = std::move(values);
}

}  // namespace volt::detail

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/trainer/loops/impl/evaluation_loop.ipp>
#endif

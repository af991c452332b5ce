/// \file
/// The prediction loop (Lightning's loops/prediction_loop.py): predict_step over the data under inference
/// mode and the precision's forward context, its results in order.
#pragma once

#include <volt/core/range.hpp>
#include <volt/trainer/call.hpp>
#include <volt/trainer/connectors/data_connector.hpp>
#include <volt/trainer/loops/evaluation_loop.hpp>
#include <volt/trainer/module.hpp>
#include <volt/trainer/parts.hpp>

#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

namespace volt::detail {

/// trainer.predict: prepares the model and returns predict_step's results for at most limit_predict_batches
/// batches of `data`. The hooks, callbacks' first and then the model's, in Lightning's order: on_predict_start,
/// on_predict_epoch_start, per batch on_predict_batch_start and on_predict_batch_end around predict_step (a
/// model's batch hooks get the batch, and the end hook the batch's prediction first), on_predict_epoch_end,
/// on_predict_end. The model is in eval mode meanwhile and in its previous mode afterwards.
template <class Parts, class Model, class Data>
auto run_prediction(Parts& parts, Model& model, Data& data) {
  using M = module_t<Model>;
  using Batch = batch_t<Data>;
  static_assert(has_predict_step<M, Batch>, "volt: trainer.predict needs the model to define `predict_step(batch[, batch_idx])`");
  auto module = model_module(model);
  parts.prepare_module(*module);
  using Result = std::remove_cvref_t<decltype(call_predict_step(*module, std::declval<Batch&>(), std::int64_t{},
                                                                std::declval<StepContext&>()))>;
  std::vector<Result> results;
  auto& state = parts.state;
  auto& callbacks = parts.callbacks.list();
  state.stage = Stage::predicting;
  state.phase_ = MetricPhase::predict;
  const bool was_training = module->is_training();
  module->eval();
  // profiler: set up for "predict", its report written when predict ends
  ProfiledStage profiled(state.profiler_, "predict",
                         state.world_size > 1 ? std::optional<int>(state.global_rank) : std::nullopt, state.log_dir());
  const auto limit = data_limit(parts.options, parts.options.limit_predict_batches, data, "limit_predict_batches");
  call_hook<Hook::on_predict_start>(*module, parts.context, callbacks, state);
  call_hook<Hook::on_predict_epoch_start>(*module, parts.context, callbacks, state);
  std::int64_t batch_idx = 0;
  for (auto&& raw : as_range(data)) {
    if (limit && batch_idx >= *limit) break;
    auto batch = parts.prepare_batch(std::forward<decltype(raw)>(raw));
    state.batch_idx = batch_idx;
    callbacks.template run<Hook::on_predict_batch_start>(state, batch_idx);
    ModelHook<Hook::on_predict_batch_start>::call(*module, parts.context, std::as_const(batch), batch_idx);
    {
      EvalGuard guard(parts.options.inference_mode);
      auto context = parts.precision.forward_context();
      results.push_back(call_predict_step(*module, batch, batch_idx, parts.context));
    }
    callbacks.template run<Hook::on_predict_batch_end>(state, batch_idx);
    ModelHook<Hook::on_predict_batch_end>::call(*module, parts.context, std::as_const(results.back()),
                                                std::as_const(batch), batch_idx);
    ++batch_idx;
  }
  call_hook<Hook::on_predict_epoch_end>(*module, parts.context, callbacks, state);
  call_hook<Hook::on_predict_end>(*module, parts.context, callbacks, state);
  if (was_training) module->train();
  state.stage = Stage::none;
  return results;
}

}  // namespace volt::detail

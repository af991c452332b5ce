/// \file
/// The prediction loop (Lightning's loops/prediction_loop.py): predict_step over the data under inference
/// mode and the precision's forward context, its results in order.
#pragma once

#include <volt/core/range.hpp>
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
/// batches of `data`.
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
  state.stage = Stage::predicting;
  state.phase_ = MetricPhase::predict;
  module->eval();
  // profiler: set up for "predict", its report written when predict ends
  ProfiledStage profiled(state.profiler_, "predict",
                         state.world_size > 1 ? std::optional<int>(state.global_rank) : std::nullopt, state.log_dir());
  const auto limit = data_limit(parts.options, parts.options.limit_predict_batches, data, "limit_predict_batches");
  std::int64_t batch_idx = 0;
  for (auto&& raw : as_range(data)) {
    if (limit && batch_idx >= *limit) break;
    auto batch = parts.prepare_batch(std::forward<decltype(raw)>(raw));
    EvalGuard guard(parts.options.inference_mode);
    auto context = parts.precision.forward_context();
    results.push_back(call_predict_step(*module, batch, batch_idx, parts.context));
    ++batch_idx;
  }
  state.stage = Stage::none;
  return results;
}

}  // namespace volt::detail

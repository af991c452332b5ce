/// \file
/// TrainerState::forward_training_epoch's pass: training_step over one epoch's batches without autograd (what
/// StochasticWeightAveraging's BatchNorm recomputation runs at the end of training).
#pragma once

#include <volt/core/range.hpp>
#include <volt/trainer/call.hpp>
#include <volt/trainer/connectors/data_connector.hpp>
#include <volt/trainer/connectors/logger_connector.hpp>
#include <volt/trainer/module.hpp>

#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace volt::detail {

/// TrainerState::forward_training_epoch: training_step over one epoch's batches, in training mode, without
/// autograd, with what it logs discarded.
template <class Parts, class M, class TrainData>
void forward_training_epoch(Parts& parts, M& module, TrainData& train_data, std::optional<std::int64_t> limit) {
  auto& metrics = parts.logger.metrics();
  std::vector<RecordedLog> discarded;
  metrics.record_into(&discarded);
  struct Restore {
    MetricStore& metrics;
    torch::nn::Module& module;
    bool was_training;
    ~Restore() {
      metrics.record_into(nullptr);
      module.train(was_training);
    }
  } restore{metrics, module, module.is_training()};
  torch::NoGradGuard no_grad;
  module.train();
  std::int64_t batch_idx = 0;
  for (auto&& raw : as_range(train_data)) {
    if (limit && batch_idx >= *limit) break;
    try {
      auto batch = parts.prepare_batch(std::forward<decltype(raw)>(raw));
      auto context = parts.precision.forward_context();
      (void)call_training_step(module, batch, batch_idx, parts.context);
    } catch (...) {
      rethrow_with_context("the forward pass over the training data, batch " + std::to_string(batch_idx));
    }
    ++batch_idx;
  }
}

}  // namespace volt::detail

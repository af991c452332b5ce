/// \file
/// The training step with TrainerOptions::cuda_graphs: warm-up, capture and replay around automatic
/// optimization (detail::CudaGraphStep), over the graph of volt/trainer/loops/train_step_graph.hpp.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/log.hpp>
#include <volt/optim/capturable.hpp>
#include <volt/trainer/loops/automatic_optimization.hpp>
#include <volt/trainer/loops/train_step_graph.hpp>

#include <torch/torch.h>

#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace volt::detail {

/// The training step with TrainerOptions::cuda_graphs: AutomaticOptimization for the warm-up steps (the last
/// one on the capture's stream), then one capture, then a replay for each batch of the captured shapes and an
/// eager step between replays for a batch of other shapes. Without cuda_graphs, or when something in the fit
/// cannot be captured (the setup warns with every reason), every step is AutomaticOptimization.
class CudaGraphStep {
 public:
  /// At the start of a fit: whether this fit captures its step, with the warning when it asked to and cannot.
  template <class M, class Parts>
  void setup(Parts& parts) {
    graph_.reset();
    if (!parts.options.cuda_graphs) return;
    // What depends on the model (its hooks inside the step), then what does not (compiled once).
    std::vector<std::string> model_hooks;
    const auto model_has = [&](std::string_view hook, bool defined) {
      if (defined) model_hooks.emplace_back(hook);
    };
    model_has("on_before_zero_grad",
              ModelHook<Hook::on_before_zero_grad>::defined<M, StepContext, torch::optim::Optimizer>);
    model_has("on_before_backward", ModelHook<Hook::on_before_backward>::defined<M, StepContext, const torch::Tensor>);
    model_has("on_after_backward", ModelHook<Hook::on_after_backward>::defined<M, StepContext>);
    model_has("on_before_optimizer_step",
              ModelHook<Hook::on_before_optimizer_step>::defined<M, StepContext, torch::optim::Optimizer>);
    decide(parts.options, parts.root_device(), parts.strategy.cuda_graph_obstacle(), parts.callbacks.list(),
           model_hooks, parts.optimization.optimizer());
  }

  /// One training batch (see the class comment).
  template <class Parts, class M, class Batch>
  void run(Parts& parts, M& module, Batch& batch, std::int64_t batch_idx, bool is_last) {
    // A build that cannot capture never enables the graph, and compiles none of the capture and replay code.
    if constexpr (!cuda_graphs_compiled) {
      AutomaticOptimization::run(parts, module, batch, batch_idx, is_last);
    } else {
      run_with_graph(parts, module, batch, batch_idx, is_last);
    }
  }

  /// The graph (replay counts, the optimizer state it holds on the device).
  TrainStepGraph& graph() { return graph_; }
  /// The graph, to read.
  const TrainStepGraph& graph() const { return graph_; }

 private:
  template <class Parts, class M, class Batch>
  void run_with_graph(Parts& parts, M& module, Batch& batch, std::int64_t batch_idx, bool is_last) {
    if (!graph_.enabled()) {
      AutomaticOptimization::run(parts, module, batch, batch_idx, is_last);
      return;
    }
    if (graph_.captured()) {
      const auto leaves = tensor_leaves(batch);
      if (graph_.matches(leaves)) {
        replay(parts, module, batch, leaves, batch_idx);
        return;
      }
      // Other shapes (a short last batch): an eager step between replays.
      graph_.before_eager_step();
      AutomaticOptimization::run(parts, module, batch, batch_idx, is_last);
      graph_.after_eager_step();
      return;
    }
    const auto warmup = parts.options.cuda_graph_warmup_steps;
    if (graph_.eager_steps() >= warmup) {
      capture(parts, module, batch, batch_idx, is_last);
      return;
    }
    if (graph_.eager_steps() + 1 == warmup) {
      // The last warm-up step runs on the capture's stream (cuBLAS/cuDNN workspaces are per stream).
      graph_.on_side_stream(parts.root_device(),
                            [&] { AutomaticOptimization::run(parts, module, batch, batch_idx, is_last); });
    } else {
      AutomaticOptimization::run(parts, module, batch, batch_idx, is_last);
    }
    graph_.count_eager_step();
  }

  /// Enables the graph when nothing in the fit stands in the way of a capture; otherwise warns with every
  /// reason (`model_hooks`: the model's hooks that run inside the step).
  void decide(const TrainerOptions& options, torch::Device device, std::optional<std::string> strategy_obstacle,
              CallbackList<TrainerState>& callbacks, const std::vector<std::string>& model_hooks,
              torch::optim::Optimizer& optimizer);

  /// Captures the training step on `batch` and runs it once; when the capture fails, the graph stays off for
  /// this fit and the batch runs eagerly.
  template <class Parts, class M, class Batch>
  void capture(Parts& parts, M& module, Batch& batch, std::int64_t batch_idx, bool is_last) {
    torch::optim::Optimizer& optimizer = parts.optimization.optimizer();
    GradScaler* scaler = parts.precision.scaler();
    const bool scaling = scaler != nullptr && scaler->is_enabled();
    try {
      graph_.prepare(optimizer, scaling, parts.root_device());
    } catch (const std::exception& error) {
      graph_.disable();
      log::warn_rank_zero(std::string("cuda_graphs: cannot capture the training step (") + error.what() +
                          "). Training eagerly.");
      AutomaticOptimization::run(parts, module, batch, batch_idx, is_last);
      return;
    }
    graph_.set_static_batch(batch);
    Batch& static_batch = graph_.template static_batch<Batch>();
    const std::string error = graph_.capture(parts.root_device(), parts.logger.metrics(), [&] {
      torch::Tensor loss;
      {
        auto context = parts.precision.forward_context();
        loss = call_training_step(module, static_batch, batch_idx, parts.context);
      }
      TORCH_CHECK(loss.defined(), "volt: training_step returned an undefined tensor");
      parts.precision.pre_backward(loss).backward();
      if (scaling) scaler->unscale_on_device(optimizer, graph_.found_inf());
      clip_gradients(parts.options, optimizer);
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
      AutomaticOptimization::run(parts, module, batch, batch_idx, is_last);
      return;
    }
    parts.logger.metrics().replay(graph_.logs());
    AutomaticOptimization::after_optimizer_step(parts);
    AutomaticOptimization::end_batch(parts, module, batch, graph_.loss(), batch_idx);
  }

  /// A replay of the captured step for `batch`, of its shapes (`leaves`: its tensors).
  template <class Parts, class M, class Batch>
  void replay(Parts& parts, M& module, Batch& batch, const std::vector<torch::Tensor>& leaves, std::int64_t batch_idx) {
    graph_.load(leaves);
    graph_.replay();
    parts.logger.metrics().replay(graph_.logs());
    AutomaticOptimization::after_optimizer_step(parts);
    AutomaticOptimization::end_batch(parts, module, batch, graph_.loss(), batch_idx);
  }

  TrainStepGraph graph_{};
};

}  // namespace volt::detail

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/trainer/loops/impl/cuda_graph_step.ipp>
#endif

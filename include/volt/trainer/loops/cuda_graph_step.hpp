/// \file
/// The training step with TrainerOptions::cuda_graphs: warm-up, capture and replay around automatic
/// optimization (detail::CudaGraphStep), over the graph of volt/trainer/loops/train_step_graph.hpp.
#pragma once

#include <volt/core/log.hpp>
#include <volt/optim/capturable.hpp>
#include <volt/trainer/loops/automatic_optimization.hpp>
#include <volt/trainer/loops/train_step_graph.hpp>

#include <torch/torch.h>

#include <cstdint>
#include <exception>
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
    const auto& options = parts.options;
    if (!options.cuda_graphs) return;
    const auto obstacles = this->template obstacles<M>(parts);
    if (obstacles.empty()) {
      graph_.enable();
      log::info_rank_zero("cuda_graphs: the training step is captured in a CUDA graph after " +
                          std::to_string(options.cuda_graph_warmup_steps) + " eager step(s) and replayed.");
      return;
    }
    std::string text = "cuda_graphs=true, but the training step cannot be captured: ";
    for (std::size_t i = 0; i < obstacles.size(); ++i) text += (i == 0 ? "" : "; ") + obstacles[i];
    log::warn_rank_zero(text + ". Training eagerly.");
  }

  /// One training batch (see the class comment).
  template <class Parts, class M, class Batch>
  void run(Parts& parts, M& module, Batch& batch, std::int64_t batch_idx, bool is_last) {
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

  /// The graph (replay counts, the optimizer state it holds on the device).
  TrainStepGraph& graph() { return graph_; }
  /// The graph, to read.
  const TrainStepGraph& graph() const { return graph_; }

 private:
  /// Why this fit's training step cannot be captured; empty when it can.
  template <class M, class Parts>
  std::vector<std::string> obstacles(Parts& parts) {
    std::vector<std::string> found;
    const auto& options = parts.options;
    const auto device = parts.root_device();
    if (!device.is_cuda()) {
      found.push_back(std::string("the device is ") + c10::DeviceTypeName(device.type(), /*lower_case=*/true) +
                      ", not cuda");
    }
    if (!cuda_graphs_compiled) {
      found.push_back(std::string("this build cannot capture CUDA graphs (it needs VOLT_WITH_CUDA and LibTorch 2.4 "
                                  "or later; LibTorch is ") +
                      compat::torch_version_string + ")");
    }
    if (auto why = parts.strategy.cuda_graph_obstacle()) found.push_back(*why);
    if (options.accumulate_grad_batches > 1) {
      found.push_back("accumulate_grad_batches is " + std::to_string(options.accumulate_grad_batches) +
                      " (a captured step is one whole optimizer step)");
    }
    if (parts.callbacks.list().template count<GradientAccumulationScheduler>() > 0) {
      found.push_back("a GradientAccumulationScheduler changes accumulate_grad_batches between epochs");
    }
    if (options.error_on_nonfinite_loss) found.push_back("error_on_nonfinite_loss reads the loss on the host at every step");
    for (Hook hook : {Hook::on_before_zero_grad, Hook::on_before_backward, Hook::on_after_backward,
                      Hook::on_before_optimizer_step}) {
      for (auto* callback : parts.callbacks.list().with(hook)) {
        found.push_back("the callback " + c10::demangle(std::string(callback->type_name()).c_str()) + " has " +
                        std::string(hook_name(hook)) + ", which runs inside the step");
      }
    }
    const auto model_has = [&](std::string_view hook, bool defined) {
      if (defined) found.push_back("the model has " + std::string(hook) + ", which runs inside the step");
    };
    model_has("on_before_zero_grad",
              ModelHook<Hook::on_before_zero_grad>::defined<M, StepContext, torch::optim::Optimizer>);
    model_has("on_before_backward", ModelHook<Hook::on_before_backward>::defined<M, StepContext, const torch::Tensor>);
    model_has("on_after_backward", ModelHook<Hook::on_after_backward>::defined<M, StepContext>);
    model_has("on_before_optimizer_step",
              ModelHook<Hook::on_before_optimizer_step>::defined<M, StepContext, torch::optim::Optimizer>);
    if (auto why = optim::CapturableStep::obstacle(parts.optimization.optimizer(), device.type())) found.push_back(*why);
    return found;
  }

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
    AutomaticOptimization::start_batch(parts, module, batch, batch_idx);
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
      AutomaticOptimization::run(parts, module, batch, batch_idx, is_last, /*batch_started=*/true);
      return;
    }
    parts.logger.metrics().replay(graph_.logs());
    AutomaticOptimization::after_optimizer_step(parts);
    AutomaticOptimization::end_batch(parts, module, batch, graph_.loss(), batch_idx);
  }

  /// A replay of the captured step for `batch`, of its shapes (`leaves`: its tensors).
  template <class Parts, class M, class Batch>
  void replay(Parts& parts, M& module, Batch& batch, const std::vector<torch::Tensor>& leaves, std::int64_t batch_idx) {
    AutomaticOptimization::start_batch(parts, module, batch, batch_idx);
    graph_.load(leaves);
    graph_.replay();
    parts.logger.metrics().replay(graph_.logs());
    AutomaticOptimization::after_optimizer_step(parts);
    AutomaticOptimization::end_batch(parts, module, batch, graph_.loss(), batch_idx);
  }

  TrainStepGraph graph_{};
};

}  // namespace volt::detail

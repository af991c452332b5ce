/// \file
/// Definitions of the functions declared in volt/trainer/loops/cuda_graph_step.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE void CudaGraphStep::decide(const TrainerOptions& options, torch::Device device,
                                       std::optional<std::string> strategy_obstacle,
                                       CallbackList<TrainerState>& callbacks,
                                       const std::vector<std::string>& model_hooks,
                                       torch::optim::Optimizer& optimizer) {
  std::vector<std::string> found;
  if (!device.is_cuda()) {
    found.push_back(std::string("the device is ") + c10::DeviceTypeName(device.type(), /*lower_case=*/true) +
                    ", not cuda");
  }
  if (!cuda_graphs_compiled) {
    found.push_back(std::string("this build cannot capture CUDA graphs (it needs VOLT_WITH_CUDA and LibTorch 2.4 "
                                "or later; LibTorch is ") +
                    compat::torch_version_string + ")");
  }
  if (strategy_obstacle) found.push_back(*strategy_obstacle);
  if (options.accumulate_grad_batches > 1) {
    found.push_back("accumulate_grad_batches is " + std::to_string(options.accumulate_grad_batches) +
                    " (a captured step is one whole optimizer step)");
  }
  if (callbacks.count<GradientAccumulationScheduler>() > 0) {
    found.push_back("a GradientAccumulationScheduler changes accumulate_grad_batches between epochs");
  }
  if (options.error_on_nonfinite_loss) found.push_back("error_on_nonfinite_loss reads the loss on the host at every step");
  for (Hook hook : {Hook::on_before_zero_grad, Hook::on_before_backward, Hook::on_after_backward,
                    Hook::on_before_optimizer_step}) {
    for (auto* callback : callbacks.with(hook)) {
      found.push_back("the callback " + c10::demangle(std::string(callback->type_name()).c_str()) + " has " +
                      std::string(hook_name(hook)) + ", which runs inside the step");
    }
  }
  for (const auto& hook : model_hooks) found.push_back("the model has " + hook + ", which runs inside the step");
  if (auto why = optim::CapturableStep::obstacle(optimizer, device.type())) found.push_back(*why);
  if (found.empty()) {
    graph_.enable();
    log::info_rank_zero("cuda_graphs: the training step is captured in a CUDA graph after " +
                        std::to_string(options.cuda_graph_warmup_steps) + " eager step(s) and replayed.");
    return;
  }
  std::string text = "cuda_graphs=true, but the training step cannot be captured: ";
  for (std::size_t i = 0; i < found.size(); ++i) text += (i == 0 ? "" : "; ") + found[i];
  log::warn_rank_zero(text + ". Training eagerly.");
}

}  // namespace volt::detail

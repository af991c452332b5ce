/// \file
/// Definitions of the functions declared in volt/trainer/loops/train_step_graph.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE bool same_tensor_shapes(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].defined() != b[i].defined()) return false;
    if (!a[i].defined()) continue;
    if (a[i].sizes() != b[i].sizes() || a[i].scalar_type() != b[i].scalar_type() || a[i].device() != b[i].device()) {
      return false;
    }
  }
  return true;
}

VOLT_INLINE void TrainStepGraph::reset() {
  release();
  enabled_ = false;
  eager_steps_ = 0;
  replays_ = 0;
  eager_fallbacks_ = 0;
}

VOLT_INLINE void TrainStepGraph::disable() {
  release();
  enabled_ = false;
}

VOLT_INLINE void TrainStepGraph::load(const std::vector<torch::Tensor>& leaves) {
  std::vector<torch::Tensor> sources, destinations;
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    if (!leaves[i].defined()) continue;
    sources.push_back(leaves[i]);
    destinations.push_back(static_leaves_[i]);
  }
  torch::NoGradGuard no_grad;
  compat::foreach_copy_(destinations, sources);
}

VOLT_INLINE void TrainStepGraph::prepare(torch::optim::Optimizer& optimizer, bool with_scaler, torch::Device device) {
  step_ = std::make_unique<optim::CapturableStep>(optimizer);
  if (with_scaler) found_inf_ = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat).device(device));
}

VOLT_INLINE void TrainStepGraph::before_eager_step() {
  if (step_) step_->write_back();
}

VOLT_INLINE void TrainStepGraph::after_eager_step() {
  ++eager_fallbacks_;
  if (!step_) return;
  step_->reload();
  const auto& parameters = step_->parameters();
  for (std::size_t i = 0; i < static_gradients_.size(); ++i) parameters[i].mutable_grad() = static_gradients_[i];
}

VOLT_INLINE void TrainStepGraph::sync_optimizer_state() {
  if (captured_ && step_) step_->write_back();
}

VOLT_INLINE void TrainStepGraph::release() {
  if (captured_ && step_) step_->write_back();
  captured_ = false;
#if VOLT_DETAIL_HAS_CUDA_GRAPHS
  graph_.reset();
#endif
  step_.reset();
  static_batch_.reset();
  static_leaves_.clear();
  static_gradients_.clear();
  logs_.clear();
  loss_ = torch::Tensor();
  found_inf_ = torch::Tensor();
}

VOLT_INLINE void TrainStepGraph::drop_gradients(const std::vector<torch::Tensor>& parameters) {
  for (auto parameter : parameters) parameter.mutable_grad() = torch::Tensor();
}

}  // namespace volt::detail

/// \file
/// volt::SingleDevice: train on one device in one process (Lightning's SingleDeviceStrategy), and its run-time
/// side, in which every collective is an identity.
#pragma once

#include <volt/accelerators/connector.hpp>
#include <volt/strategies/strategy.hpp>

#include <torch/torch.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace volt {

/// Strategy policy: one process, one device. The model, the optimizer state and every batch live on the
/// Trainer's root device. Reductions, barriers and broadcasts are identities.
struct SingleDevice {
  /// Lightning's strategy name, used in messages and by the command line.
  static constexpr std::string_view name = "single_device";
  /// Whether the strategy runs several processes that synchronise gradients (the DDP family).
  static constexpr bool is_distributed = false;
};

namespace detail {

/// SingleDevice's run time: one process on the one selected device; every collective is an identity
/// (StrategyRuntimeInterface lists the members' contracts).
template <>
class StrategyRuntime<SingleDevice> : public StrategyRuntimeBase<StrategyRuntime<SingleDevice>> {
 public:
  /// Takes the selection's one device (the hosts check there is exactly one).
  void configure(const DeviceSelection& selection, int /*num_nodes*/) { root_device_ = selection.root_device(); }
  /// One process, no process group: sets the device up (a CUDA device becomes the current one and may print
  /// the tensor-core hint, as Lightning's accelerator.setup_device).
  void setup_environment() {
    if (root_device_.is_cuda()) CUDA::setup_device(root_device_);
  }
  /// The selected device.
  torch::Device root_device() const { return root_device_; }
  /// 0.
  int global_rank() const { return 0; }
  /// 0.
  int local_rank() const { return 0; }
  /// 0.
  int node_rank() const { return 0; }
  /// 1.
  int world_size() const { return 1; }
  /// true.
  bool is_global_zero() const { return true; }
  /// `data` itself: the one process takes every batch.
  template <class Data>
  decltype(auto) distribute_data(Data& data) {
    return (data);
  }
  /// Nothing: the module is used as it is.
  template <class M>
  void setup_module(M& /*module*/) {}
  /// Nothing: there are no other copies of the buffers.
  template <class M>
  void sync_buffers(M& /*module*/) {}
  /// Nothing: no gradient synchronisation.
  void prepare_for_backward(bool /*sync*/) {}
  /// Nothing: the gradients in .grad are final.
  void finish_gradient_sync() {}
  /// Returns at once.
  void barrier() {}
  /// Leaves `tensor` as it is.
  void all_reduce(torch::Tensor& /*tensor*/, ReduceOp /*op*/ = ReduceOp::mean) {}
  /// Leaves `tensor` as it is.
  void broadcast(torch::Tensor& /*tensor*/, int /*root*/ = 0) {}
  /// `{tensor}`.
  std::vector<torch::Tensor> all_gather(const torch::Tensor& tensor) { return {tensor}; }
  /// `decision`.
  bool reduce_boolean_decision(bool decision, bool /*all*/ = true) { return decision; }
  /// Nothing: no peers to tell.
  void on_failure(const std::string& /*message*/) noexcept {}
  /// nullopt: nothing of this strategy runs inside the step.
  std::optional<std::string> cuda_graph_obstacle() const { return std::nullopt; }

 private:
  torch::Device root_device_ = torch::kCPU;
};

}  // namespace detail

static_assert(StrategyRuntimeInterface<detail::StrategyRuntime<SingleDevice>>,
              "volt: StrategyRuntime<SingleDevice> must provide every member of volt::StrategyRuntimeInterface");

}  // namespace volt

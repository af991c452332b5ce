/// \file
/// volt::Fabric with volt::DDP: the strategy services Fabric calls, backed by the Trainer's DDP run-time.
///
/// The services are those of include/volt/fabric/strategy_services.hpp; the run-time is the Trainer's
/// (launcher, process group, gradient reducer).
///
/// ```
/// volt::Fabric<volt::CPU, volt::DDP> fabric({.devices = 2});   // launches local rank 1, joins the group
/// auto [model, optimizer] = fabric.setup(model, optimizer);     // rank 0's weights everywhere, reducer attached
/// fabric.backward(loss);                                        // gradients averaged across ranks
/// { auto guard = fabric.no_backward_sync(model); fabric.backward(loss); }   // accumulate locally
/// ```
#pragma once

#include <volt/distributed/ddp_runtime.hpp>
#include <volt/fabric/strategy_services.hpp>

#include <torch/torch.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace volt {

/// DDP's services for volt::Fabric: one process per device, gradients averaged across ranks in backward.
/// Fabric default-constructs it and keeps it for its lifetime; the process group is shared with any other
/// Trainer or Fabric of the process. Every member that communicates is a collective: every rank must call
/// it, in the same order, and it throws DistributedError when a peer fails or times out.
template <>
struct fabric_strategy_services<DDP> {
  /// What no_backward_sync returns: while it lives, backward() accumulates gradients locally; its
  /// destructor restores the previous setting (guards nest).
  class NoSyncGuard {
   public:
    /// Skips gradient synchronisation from now on when `enabled`; remembers the previous setting either way.
    explicit NoSyncGuard(bool* flag, bool enabled) : flag_(flag), previous_(*flag) {
      if (enabled) *flag_ = true;
    }
    ~NoSyncGuard() { *flag_ = previous_; }
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;

   private:
    bool* flag_;
    bool previous_;
  };

  /// Reads the cluster environment, launches the other local ranks when this is a volt-launched local rank 0,
  /// and joins the process group. Called once, by Fabric's constructor, on every rank. Throws what
  /// detect_cluster_environment throws, MisconfigurationError when LOCAL_RANK is set without MASTER_PORT,
  /// and DistributedError when the peers do not join within the timeout.
  void setup_environment(const std::vector<torch::Device>& devices, int num_nodes) {
    DeviceSelection selection;
    selection.parallel_devices = devices;
    for (std::size_t i = 0; i < devices.size(); ++i) selection.device_ids.push_back(static_cast<int>(i));
    runtime_.configure(selection, num_nodes);
    runtime_.setup_environment();
  }
  /// This process's device: the selected device at index local_rank().
  torch::Device root_device(const std::vector<torch::Device>& /*devices*/) const { return runtime_.root_device(); }
  /// The number of processes: devices x num_nodes.
  int world_size() const { return runtime_.world_size(); }
  /// This process's rank among all processes.
  int global_rank() const { return runtime_.global_rank(); }
  /// This process's rank on its node.
  int local_rank() const { return runtime_.local_rank(); }
  /// The index of this process's node.
  int node_rank() const { return runtime_.node_rank(); }

  /// Broadcasts rank 0's parameters and buffers and attaches the gradient reducer (a collective, from
  /// Fabric::setup and setup_module).
  template <class M>
  void setup_module(M& module) {
    runtime_.setup_module(module);
  }

  /// Called by Fabric before the backward pass: arms the reducer, or disarms it inside no_backward_sync.
  void before_backward() { runtime_.prepare_for_backward(!no_sync_); }
  /// Called by Fabric after the backward pass: unless inside no_backward_sync, waits for the gradient
  /// all-reduce and writes the averaged gradients into .grad. Throws DistributedError.
  void after_backward() {
    if (!no_sync_) runtime_.finish_gradient_sync();
  }

  /// Returns when every rank has reached it (`name` is not used).
  void barrier(const std::string& /*name*/) { runtime_.barrier(); }

  /// Lightning Fabric's all_reduce: "sum", "max", "min", "product", and the mean for "mean" and "avg" (the
  /// ops Fabric::all_reduce lets through). Returns a new tensor; `tensor` is not changed.
  torch::Tensor all_reduce(const torch::Tensor& tensor, const std::string& op) {
    auto result = tensor.clone();
    ReduceOp reduce = ReduceOp::mean;
    if (op == "sum") reduce = ReduceOp::sum;
    else if (op == "max") reduce = ReduceOp::max;
    else if (op == "min") reduce = ReduceOp::min;
    else if (op == "product") reduce = ReduceOp::product;
    runtime_.all_reduce(result, reduce);
    return result;
  }

  /// Every rank's tensor stacked along a new first dimension of size world_size().
  torch::Tensor all_gather(const torch::Tensor& tensor) { return torch::stack(runtime_.all_gather(tensor)); }

  /// Rank `src`'s value on every rank: tensors (same shape and dtype on every rank), arithmetic values (sent
  /// as a float64, so integers beyond 2^53 lose precision) and strings; other types do not compile.
  template <class T>
  T broadcast(T value, int src) {
    const auto device = runtime_.root_device();
    if constexpr (std::is_same_v<std::remove_cvref_t<T>, torch::Tensor>) {
      auto result = value.to(device).clone();
      runtime_.broadcast(result, src);
      return result;
    } else if constexpr (std::is_arithmetic_v<T>) {
      auto tensor = torch::tensor({static_cast<double>(value)}, torch::TensorOptions().dtype(torch::kDouble).device(device));
      runtime_.broadcast(tensor, src);
      return static_cast<T>(tensor.cpu().template item<double>());
    } else if constexpr (std::is_same_v<std::remove_cvref_t<T>, std::string>) {
      auto length = torch::tensor({static_cast<std::int64_t>(value.size())}, torch::TensorOptions().device(device));
      runtime_.broadcast(length, src);
      const auto size = length.cpu().template item<std::int64_t>();
      auto bytes = torch::zeros({size}, torch::TensorOptions().dtype(torch::kUInt8));
      if (global_rank() == src) {
        std::memcpy(bytes.data_ptr<std::uint8_t>(), value.data(), static_cast<std::size_t>(size));
      }
      bytes = bytes.to(device);
      runtime_.broadcast(bytes, src);
      bytes = bytes.cpu();
      return std::string(reinterpret_cast<const char*>(bytes.data_ptr<std::uint8_t>()), static_cast<std::size_t>(size));
    } else {
      static_assert(std::is_same_v<T, torch::Tensor>,
                    "volt::Fabric::broadcast with DDP supports torch::Tensor, arithmetic values and std::string");
      return value;
    }
  }

  /// A guard under which backward() skips the gradient all-reduce when `enabled` (for every module, not
  /// only `module`).
  NoSyncGuard no_backward_sync(torch::nn::Module& /*module*/, bool enabled) { return NoSyncGuard(&no_sync_, enabled); }

 private:
  detail::StrategyRuntime<DDP> runtime_;
  bool no_sync_ = false;
};

}  // namespace volt

// volt::Fabric with volt::DDP: the strategy services Fabric calls (include/volt/fabric/strategy_services.hpp),
// backed by the same run-time as the Trainer's DDP (launcher, process group, gradient reducer).
//
//   volt::Fabric<volt::CPU, volt::DDP> fabric({.devices = 2});   // launches local rank 1, joins the group
//   auto [model, optimizer] = fabric.setup(model, optimizer);     // rank 0's weights everywhere, reducer attached
//   fabric.backward(loss);                                        // gradients averaged across ranks
//   { auto guard = fabric.no_backward_sync(model); fabric.backward(loss); }   // accumulate locally
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

template <>
struct fabric_strategy_services<DDP> {
  /// Restores gradient synchronisation when it goes out of scope.
  class NoSyncGuard {
   public:
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
  /// and joins the process group. Throws what detect_cluster_environment and the rendezvous throw.
  void setup_environment(const std::vector<torch::Device>& devices, int num_nodes) {
    DeviceSelection selection;
    selection.parallel_devices = devices;
    for (std::size_t i = 0; i < devices.size(); ++i) selection.device_ids.push_back(static_cast<int>(i));
    runtime_.configure(selection, num_nodes);
    runtime_.setup_environment();
  }
  torch::Device root_device(const std::vector<torch::Device>& /*devices*/) const { return runtime_.root_device(); }
  int world_size() const { return runtime_.world_size(); }
  int global_rank() const { return runtime_.global_rank(); }
  int local_rank() const { return runtime_.local_rank(); }
  int node_rank() const { return runtime_.node_rank(); }

  /// Broadcasts rank 0's parameters and buffers and attaches the gradient reducer.
  template <class M>
  void setup_module(M& module) {
    runtime_.setup_module(module);
  }

  /// Called by Fabric around backward(): arms the reducer (unless inside no_backward_sync) and completes the
  /// gradient all-reduce afterwards.
  void before_backward() { runtime_.prepare_for_backward(!no_sync_); }
  void after_backward() {
    if (!no_sync_) runtime_.finish_gradient_sync();
  }

  void barrier(const std::string& /*name*/) { runtime_.barrier(); }

  /// Lightning Fabric's all_reduce: "mean"/"avg", "sum", "max", "min". Returns a new tensor.
  torch::Tensor all_reduce(const torch::Tensor& tensor, const std::string& op) {
    auto result = tensor.clone();
    ReduceOp reduce = ReduceOp::mean;
    if (op == "sum") reduce = ReduceOp::sum;
    else if (op == "max") reduce = ReduceOp::max;
    else if (op == "min") reduce = ReduceOp::min;
    runtime_.all_reduce(result, reduce);
    return result;
  }

  /// Every rank's tensor stacked along a new first dimension of size world_size().
  torch::Tensor all_gather(const torch::Tensor& tensor) { return torch::stack(runtime_.all_gather(tensor)); }

  /// Rank `src`'s value on every rank: tensors (same shape and dtype on every rank), arithmetic values and
  /// strings; other types do not compile.
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

  NoSyncGuard no_backward_sync(torch::nn::Module& /*module*/, bool enabled) { return NoSyncGuard(&no_sync_, enabled); }

 private:
  detail::StrategyRuntime<DDP> runtime_;
  bool no_sync_ = false;
};

}  // namespace volt

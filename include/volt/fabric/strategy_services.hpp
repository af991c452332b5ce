/// \file
/// volt::fabric_strategy_services: what volt::Fabric asks of its strategy, and SingleDevice's answer.
///
/// Process ranks, collectives, barriers, wrapping the module and skipping gradient synchronisation. This is
/// the one place Fabric depends on the strategy; a strategy supports Fabric by specializing
/// volt::fabric_strategy_services for it (volt::DDP does so in volt/distributed/fabric_ddp.hpp).
#pragma once

#include <volt/strategies/single_device.hpp>

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace volt {

/// The strategy services Fabric calls. The primary template is undefined: a strategy without a
/// specialization cannot host a Fabric. A specialization provides, as static members or members of an
/// object Fabric default-constructs and keeps for its lifetime:
///
/// ```
/// void setup_environment(const std::vector<torch::Device>& devices, int num_nodes)  // once, in the constructor
/// torch::Device root_device(const std::vector<torch::Device>& devices) const        // this process's device
/// int world_size() const, global_rank() const, local_rank() const, node_rank() const
/// template <class M> void setup_module(M& module)            // after convert_module and the move to the device
/// void barrier(const std::string& name)
/// torch::Tensor all_reduce(const torch::Tensor& tensor, const std::string& op)   // op: "mean", "sum", ...
/// torch::Tensor all_gather(const torch::Tensor& tensor)
/// template <class T> T broadcast(T value, int src)
/// auto no_backward_sync(torch::nn::Module& module, bool enabled)                 // an RAII guard
/// optional: void before_backward(), void after_backward()    // around every fabric.backward()
/// ```
///
/// Fabric calls setup_environment and root_device from its constructor, setup_module from setup() and
/// setup_module(), before_backward and after_backward from backward(), and the others from the Fabric
/// methods of the same name.
template <class Strategy>
struct fabric_strategy_services;

/// One process on one device: every collective is the identity (Lightning's SingleDeviceStrategy).
template <>
struct fabric_strategy_services<SingleDevice> {
  /// A guard that does nothing (SingleDevice has no gradient synchronisation to skip).
  struct NoSyncGuard {
    ~NoSyncGuard() {}  // NOLINT(modernize-use-equals-default): keeps -Wunused-variable quiet for the guard
  };

  /// Nothing to set up: one process, no process group.
  void setup_environment(const std::vector<torch::Device>& /*devices*/, int /*num_nodes*/) {}
  /// The one selected device (Fabric checks there is exactly one).
  torch::Device root_device(const std::vector<torch::Device>& devices) const { return devices.front(); }
  /// 1.
  int world_size() const { return 1; }
  /// 0.
  int global_rank() const { return 0; }
  /// 0.
  int local_rank() const { return 0; }
  /// 0.
  int node_rank() const { return 0; }
  /// Nothing: the module is used as it is.
  template <class M>
  void setup_module(M& /*module*/) {}
  /// Returns at once.
  void barrier(const std::string& /*name*/) {}
  /// `tensor` itself, for every op.
  torch::Tensor all_reduce(const torch::Tensor& tensor, const std::string& /*op*/) { return tensor; }
  /// `tensor` itself, without a new leading dimension.
  torch::Tensor all_gather(const torch::Tensor& tensor) { return tensor; }
  /// `value` itself.
  template <class T>
  T broadcast(T value, int /*src*/) {
    return value;
  }
  /// A guard that does nothing.
  NoSyncGuard no_backward_sync(torch::nn::Module& /*module*/, bool /*enabled*/) { return {}; }
};

}  // namespace volt

/// \file
/// The run-time side of the strategies (Lightning's Strategy objects); implementation, no public API.
///
/// `volt::detail::StrategyRuntime<S>` is what the Trainer and Fabric hold for their Strategy policy; its
/// interface is volt::StrategyRuntimeInterface (volt/strategies/strategy.hpp). DDP's joins the processes
/// (launching them when nobody else did), owns the process group and the gradient reducer, and provides the
/// collectives (spec section 6.2). SingleDevice's is in volt/strategies/single_device.hpp.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/accelerators/connector.hpp>
#include <volt/core/compat.hpp>
#include <volt/core/errors.hpp>
#include <volt/core/log.hpp>
#include <volt/core/range.hpp>
#include <volt/distributed/environment.hpp>
#include <volt/distributed/launcher.hpp>
#include <volt/distributed/process_group.hpp>
#include <volt/distributed/reducer.hpp>
#include <volt/distributed/sampler.hpp>
#include <volt/strategies/ddp.hpp>
#include <volt/strategies/strategy.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace volt::detail {

/// The process group of this process, shared by every Trainer and Fabric of the run (created once).
VOLT_INLINE std::shared_ptr<ProcessGroup>& process_group_slot();

/// How long a rank waits for its peers (rendezvous and each collective): VOLT_DDP_TIMEOUT_S seconds, default
/// 1800 (PyTorch's default process-group timeout).
VOLT_INLINE std::chrono::milliseconds distributed_timeout();

/// Gradient bucket capacity: VOLT_DDP_BUCKET_MB megabytes (PyTorch DDP's bucket_cap_mb; an integer >= 1),
/// default 25.
VOLT_INLINE std::int64_t ddp_bucket_bytes();

/// Whether buffers (BatchNorm statistics) are broadcast from rank 0 before each training step: true unless
/// VOLT_DDP_BROADCAST_BUFFERS is 0 (PyTorch DDP's broadcast_buffers=False; each rank then keeps its own
/// statistics and checkpoints hold rank 0's).
VOLT_INLINE bool ddp_broadcast_buffers();

#ifdef VOLT_DETAIL_HAS_C10D

/// Rank 0's buffers (BatchNorm statistics) onto every rank, as PyTorch's DistributedDataParallel does before
/// each forward with broadcast_buffers=True. Buffers are grouped by dtype (and device) once; per call and group,
/// rank 0 packs its buffers into a kept flat tensor with one kernel (a cat) and needs nothing back (its buffers
/// are the source); the other ranks receive into theirs and unpack with one multi-tensor copy. One broadcast per
/// group.
class BufferBroadcaster {
 public:
  BufferBroadcaster() = default;

  /// Groups `buffers` by dtype and device and makes each group's flat tensor.
  BufferBroadcaster(ProcessGroup& group, const std::vector<torch::Tensor>& buffers) : group_(&group) {
    for (const auto& buffer : buffers) {
      auto same = [&](const Group& part) {
        return part.buffers.front().scalar_type() == buffer.scalar_type() &&
               part.buffers.front().device() == buffer.device();
      };
      auto found = std::find_if(groups_.begin(), groups_.end(), same);
      if (found == groups_.end()) found = groups_.insert(groups_.end(), Group{});
      found->buffers.push_back(buffer);
    }
    for (auto& part : groups_) {
      std::int64_t numel = 0;
      for (const auto& buffer : part.buffers) numel += buffer.numel();
      part.flat = torch::empty({numel}, part.buffers.front().options());
      std::int64_t offset = 0;
      for (const auto& buffer : part.buffers) {
        part.unpacked.push_back(part.flat.narrow(0, offset, buffer.numel()).view(buffer.sizes()));
        offset += buffer.numel();
      }
    }
  }

  /// Whether there is anything to broadcast.
  bool empty() const { return groups_.empty(); }

  /// Every rank's buffers become rank 0's. A collective: every rank calls it at the same point. Throws
  /// DistributedError.
  void broadcast() {
    torch::NoGradGuard no_grad;
    const bool source = group_->rank() == 0;
    for (auto& part : groups_) {
      if (source) {
        // Flattened per call, not once: loading a checkpoint gives a buffer new storage (set_), which would
        // leave a kept view behind; reshape of a contiguous buffer is a view and costs no kernel.
        part.packed.clear();
        for (const auto& buffer : part.buffers) part.packed.push_back(buffer.reshape({-1}));
        at::cat_out(part.flat, part.packed);
        part.packed.clear();
      }
      group_->broadcast(part.flat, 0);
      if (!source) compat::foreach_copy_(part.buffers, part.unpacked);
    }
  }

 private:
  struct Group {
    std::vector<torch::Tensor> buffers;
    std::vector<torch::Tensor> unpacked;  ///< per buffer, its part of flat shaped like it
    std::vector<torch::Tensor> packed;    ///< rank 0: the buffers flattened, during a call
    torch::Tensor flat;
  };
  ProcessGroup* group_ = nullptr;
  std::vector<Group> groups_;
};

#endif

/// DDP: one process per device (Lightning's DDPStrategy with the popen launcher).
template <>
class StrategyRuntime<DDP> : public StrategyRuntimeBase<StrategyRuntime<DDP>> {
 public:
  /// Reads the cluster environment for `selection`'s devices on `num_nodes` nodes and picks this process's
  /// device (parallel_devices[local_rank]). Throws as detect_cluster_environment does.
  void configure(const DeviceSelection& selection, int num_nodes) {
    devices_per_node_ = selection.num_devices();
    num_nodes_ = num_nodes;
    environment_ = detect_cluster_environment(devices_per_node_, num_nodes_);
    root_device_ = selection.parallel_devices.at(static_cast<std::size_t>(environment_.local_rank));
    log::set_global_rank(environment_.global_rank);
  }

  /// Starts the other local processes when this one is local rank 0 of a volt-launched run, then joins the
  /// process group (once per process). Prints Lightning's "Initializing distributed" line on every rank and the
  /// banner on rank 0. Throws DistributedError when the peers do not come within the timeout.
  void setup_environment() {
    if (group_) return;
    if (root_device_.is_cuda()) CUDA::setup_device(root_device_);  // NCCL binds the current device
    auto& slot = process_group_slot();
    if (!slot) {
      if (environment_.world_size > 1 && !environment_.creates_processes_externally) {
        if (environment_.main_port == 0) environment_.main_port = find_free_port();
        ::setenv("MASTER_ADDR", environment_.main_address.c_str(), 1);
        ::setenv("MASTER_PORT", std::to_string(environment_.main_port).c_str(), 1);
        ::setenv("NODE_RANK", std::to_string(environment_.node_rank).c_str(), 1);
        ::setenv("WORLD_SIZE", std::to_string(environment_.world_size).c_str(), 1);
        SubprocessLauncher::instance().launch(devices_per_node_);
      } else if (environment_.main_port == 0) {
        throw MisconfigurationError(
            "volt: LOCAL_RANK is set (so another process launched this one) but MASTER_PORT is not; set MASTER_ADDR "
            "and MASTER_PORT for every process, or start only local rank 0 and let volt launch the others");
      }
      log::info("Initializing distributed: GLOBAL_RANK: " + std::to_string(environment_.global_rank) +
                ", MEMBER: " + std::to_string(environment_.global_rank + 1) + "/" +
                std::to_string(environment_.world_size));
      slot = std::make_shared<ProcessGroup>(environment_, root_device_, distributed_timeout());
      if (environment_.global_rank == 0) {
        const std::string line(100, '-');
        log::info(line + "\ndistributed_backend=" + slot->backend_name() +
                  "\nAll distributed processes registered. Starting with " + std::to_string(environment_.world_size) +
                  " processes\n" + line + "\n");
      }
    }
    group_ = slot;
  }

  /// This process's device: the selected device at index local_rank().
  torch::Device root_device() const { return root_device_; }
  /// This process's rank among all processes.
  int global_rank() const { return environment_.global_rank; }
  /// This process's rank on its node.
  int local_rank() const { return environment_.local_rank; }
  /// The index of this process's node.
  int node_rank() const { return environment_.node_rank; }
  /// The number of processes: devices x num_nodes.
  int world_size() const { return environment_.world_size; }
  /// Whether this process is global rank 0.
  bool is_global_zero() const { return environment_.global_rank == 0; }
  /// The cluster environment configure() read.
  const ClusterEnvironment& environment() const { return environment_; }
  /// The process group (after setup_environment()).
  ProcessGroup& group() { return *group_; }

  /// This rank's share of `data`: `data` itself when it is already split (volt::per_rank, a loader with
  /// volt::DistributedSampler) or is detail::NoData; otherwise a detail::RankShard view taking this rank's
  /// batch of each group of world_size() batches (`data` must outlive it).
  template <class Data>
  decltype(auto) distribute_data(Data& data) {
    using D = std::remove_cvref_t<Data>;
    if constexpr (is_per_rank<D>::value || uses_distributed_sampler<D>::value || std::is_same_v<D, NoData>) {
      return (data);
    } else {
      using Range = std::remove_reference_t<decltype(as_range(data))>;
      return RankShard<Range>(as_range(data), world_size(), global_rank());
    }
  }

  /// Makes every rank start from rank 0's parameters and buffers, and attaches the gradient reducer.
  template <class M>
  void setup_module(M& module) {
    torch::NoGradGuard no_grad;
    for (auto& parameter : module.parameters()) broadcast_in_place(parameter);
    for (auto& buffer : module.buffers()) broadcast_in_place(buffer);
    reducer_.reset();
    reducer_ = std::make_unique<GradientReducer>(*group_, module.parameters(), ddp_bucket_bytes());
    buffers_ = ddp_broadcast_buffers() ? BufferBroadcaster(*group_, module.buffers()) : BufferBroadcaster();
  }

  /// Broadcasts the module's buffers (BatchNorm statistics) from rank 0 before a training step, as PyTorch's
  /// DistributedDataParallel does with broadcast_buffers=True: one collective per dtype (BufferBroadcaster).
  template <class M>
  void sync_buffers(M& /*module*/) {
    if (buffers_.empty() || world_size() == 1) return;
    buffers_.broadcast();
  }

  /// Before a backward pass: arms the gradient reducer to all-reduce the gradients as they are produced
  /// (`sync`), or to leave them local (gradient accumulation).
  void prepare_for_backward(bool sync) {
    if (reducer_) reducer_->prepare_for_backward(sync);
  }
  /// After a backward pass with sync: waits for the gradient all-reduce and writes the averaged gradients into
  /// .grad. Throws DistributedError.
  void finish_gradient_sync() {
    if (reducer_) reducer_->finish();
  }

  /// Returns when every rank has reached it. A collective.
  void barrier() { group_->barrier(); }
  /// Reduces `tensor` in place over all ranks with `op`. A collective.
  void all_reduce(torch::Tensor& tensor, ReduceOp op = ReduceOp::mean) { group_->all_reduce(tensor, op); }
  /// Overwrites `tensor` with rank `root`'s in place. A collective.
  void broadcast(torch::Tensor& tensor, int root = 0) { group_->broadcast(tensor, root); }
  /// Every rank's `tensor` (same shape on every rank), in rank order. A collective.
  std::vector<torch::Tensor> all_gather(const torch::Tensor& tensor) { return group_->all_gather(tensor); }

  /// Lightning's reduce_boolean_decision: true when every rank decided so (all) or any rank did (!all).
  bool reduce_boolean_decision(bool decision, bool all = true) {
    auto count = torch::tensor({decision ? 1.0 : 0.0}, torch::TensorOptions().device(root_device_));
    group_->all_reduce(count, ReduceOp::sum);
    const double total = count.item<double>();
    return all ? total == static_cast<double>(world_size()) : total > 0.0;
  }

  /// Called on an exception inside fit on this rank: leaves a note naming this rank for the others and drops
  /// the backend so they stop waiting on it.
  void on_failure(const std::string& message) noexcept {
    if (!group_) return;
    group_->note_failure(message);
    group_->abort();
    process_group_slot().reset();
    group_.reset();
    reducer_.reset();
    buffers_ = BufferBroadcaster();
  }

  /// A captured CUDA graph cannot hold the gradient all-reduce of the step.
  std::optional<std::string> cuda_graph_obstacle() const {
    return "the strategy is " + std::string(DDP::name) + " (a captured step cannot contain the gradient all-reduce)";
  }

 private:
  void broadcast_in_place(torch::Tensor& tensor) {
    auto contiguous = tensor.contiguous();
    group_->broadcast(contiguous, 0);
    if (!contiguous.is_same(tensor)) tensor.copy_(contiguous);
  }

  int devices_per_node_ = 1;
  int num_nodes_ = 1;
  ClusterEnvironment environment_{};
  torch::Device root_device_ = torch::kCPU;
  std::shared_ptr<ProcessGroup> group_;
  std::unique_ptr<GradientReducer> reducer_;
  BufferBroadcaster buffers_;
};

}  // namespace volt::detail

static_assert(volt::StrategyRuntimeInterface<volt::detail::StrategyRuntime<volt::DDP>>,
              "volt: StrategyRuntime<DDP> must provide every member of volt::StrategyRuntimeInterface");

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/distributed/impl/ddp_runtime.ipp>
#endif

/// \file
/// volt::StrategyRuntimeInterface: the one run-time interface of a strategy (Lightning's Strategy object), what
/// the Trainer and Fabric call on it, and what every strategy gets on top of it.
///
/// A Strategy policy (volt::SingleDevice, volt::DDP) is a compile-time tag; its run-time side is
/// `volt::detail::StrategyRuntime<Strategy>`, which the Trainer and Fabric hold and which satisfies
/// StrategyRuntimeInterface. SingleDevice's is in volt/strategies/single_device.hpp, DDP's in
/// volt/distributed/ddp_runtime.hpp.
#pragma once

#include <volt/accelerators/connector.hpp>

#include <torch/torch.h>

#include <concepts>
#include <cstdint>
#include <cstring>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace volt {

/// Reduction of a collective.
enum class ReduceOp {
  sum,   ///< Element-wise sum over ranks.
  mean,  ///< The sum divided by the world size (integer tensors: truncated).
  max,   ///< Element-wise maximum.
  min,   ///< Element-wise minimum.
  product,  ///< Element-wise product.
};

namespace detail {

/// The run-time side of the Strategy policy `Strategy`; specialized per strategy (see the file comment).
template <class Strategy>
class StrategyRuntime;

/// Marks "no data" (fit() without validation data); a strategy distributes it as it is.
struct NoData {};

}  // namespace detail

/// What the Trainer and Fabric call on the run-time side of their strategy. `runtime` is one per host
/// object, default-constructed; on one rank the calls come in this order: configure, setup_environment,
/// setup_module, then the others. Every member marked "a collective" must be called by every rank in the same
/// order; it throws DistributedError when a peer fails or times out. With one process each is an identity.
///
/// - `configure(const DeviceSelection& selection, int num_nodes)`: from the host's constructor, once; reads
///   the cluster environment and picks this process's device from `selection` (the devices of one node).
/// - `setup_environment()`: launches the other local processes where volt launches them and joins the
///   process group (once per runtime; later calls return at once). SingleDevice: nothing.
/// - `root_device()`, `global_rank()`, `local_rank()`, `node_rank()`, `world_size()`, `is_global_zero()`:
///   this process's device and place in the run, valid after configure.
/// - `distribute_data(Data& data)`: this rank's share of a data argument (a range, or a pointer to one):
///   `data` itself when there is one process or it is already split (volt::per_rank, a loader with
///   volt::DistributedSampler, detail::NoData), else a view of every world_size()-th batch.
/// - `setup_module(M& module)`: after the module is on root_device(); DDP: a collective that gives every rank
///   rank 0's parameters and buffers and attaches the gradient reducer.
/// - `sync_buffers(M& module)`: before each training step; DDP: rank 0's buffers onto every rank.
/// - `prepare_for_backward(bool sync)`, `finish_gradient_sync()`: around each backward pass; with `sync`
///   the second is a collective that leaves the averaged gradients in .grad.
/// - `barrier()`, `all_reduce(tensor, ReduceOp)` (in place), `broadcast(tensor, root)` (in place),
///   `all_gather(tensor)` (every rank's tensor in rank order), `reduce_boolean_decision(decision, all)`
///   (whether all ranks, or any rank, decided so): collectives.
/// - `on_failure(message) noexcept`: on the rank where training threw; leaves a note for the peers and
///   drops the process group so they stop waiting.
/// - `cuda_graph_obstacle()`: why a training step of this strategy cannot be captured in a CUDA graph, or
///   nullopt.
/// - `run_and_agree(work, peer_error)`: runs `work()` here, then lets every rank learn whether any rank's
///   work threw (detail::StrategyRuntimeBase::run_and_agree).
template <class Runtime>
concept StrategyRuntimeInterface =
    std::default_initializable<Runtime> &&
    requires(Runtime& runtime, const Runtime& view, const DeviceSelection& selection, int count, bool flag,
             torch::nn::Module& module, torch::Tensor& tensor, const torch::Tensor& input, ReduceOp op,
             std::vector<torch::Tensor>& batches, const std::string& message, void (*work)(),
             std::runtime_error (*peer_error)()) {
      runtime.configure(selection, count);
      runtime.setup_environment();
      { view.root_device() } -> std::same_as<torch::Device>;
      { view.global_rank() } -> std::same_as<int>;
      { view.local_rank() } -> std::same_as<int>;
      { view.node_rank() } -> std::same_as<int>;
      { view.world_size() } -> std::same_as<int>;
      { view.is_global_zero() } -> std::same_as<bool>;
      runtime.distribute_data(batches);
      runtime.setup_module(module);
      runtime.sync_buffers(module);
      runtime.prepare_for_backward(flag);
      runtime.finish_gradient_sync();
      runtime.barrier();
      runtime.all_reduce(tensor, op);
      runtime.broadcast(tensor, count);
      { runtime.all_gather(input) } -> std::same_as<std::vector<torch::Tensor>>;
      { runtime.reduce_boolean_decision(flag, flag) } -> std::same_as<bool>;
      { runtime.on_failure(message) } noexcept;
      { view.cuda_graph_obstacle() } -> std::same_as<std::optional<std::string>>;
      runtime.run_and_agree(work, peer_error);
    };

namespace detail {

/// `value` as rank `root` holds it, on every rank: its length, then its bytes, each one broadcast (two
/// collectives; with one process they are identities and `value` comes back). `Runtime` satisfies
/// StrategyRuntimeInterface.
template <class Runtime>
std::string broadcast_string(Runtime& runtime, const std::string& value, int root) {
  const torch::Device device = runtime.root_device();
  auto length = torch::tensor({static_cast<std::int64_t>(value.size())}, torch::TensorOptions().device(device));
  runtime.broadcast(length, root);
  const auto size = length.cpu().template item<std::int64_t>();
  auto bytes = torch::zeros({size}, torch::TensorOptions().dtype(torch::kUInt8));
  if (runtime.global_rank() == root) {
    std::memcpy(bytes.data_ptr<std::uint8_t>(), value.data(), static_cast<std::size_t>(size));
  }
  bytes = bytes.to(device);
  runtime.broadcast(bytes, root);
  bytes = bytes.cpu();
  return std::string(reinterpret_cast<const char*>(bytes.data_ptr<std::uint8_t>()), static_cast<std::size_t>(size));
}

/// What every StrategyRuntime has on top of its own members, written once over them (`Derived` is the
/// StrategyRuntime that derives from it).
template <class Derived>
class StrategyRuntimeBase {
 public:
  /// Runs `work()` on this rank (every rank calls it; `work` decides what this rank does, e.g. write a file
  /// only on rank 0), then makes every rank agree on whether it failed anywhere. With more than one process
  /// that is ONE collective, reduce_boolean_decision(failed, all=false), so it also serves as the barrier
  /// after the work. Afterwards this rank rethrows its own exception when its work threw; otherwise, when
  /// another rank's work threw, it throws `peer_error()`'s result. With one process, `work()`'s exception
  /// propagates as it is.
  ///
  /// When `peer_error` takes a `const std::string&`, the ranks also share the failure's text: once the
  /// collective above says a rank failed, the lowest-numbered such rank broadcasts its exception's what()
  /// ("unknown error" for an empty text or an exception not derived from std::exception), and the other ranks
  /// throw `peer_error(text)`. That costs three more collectives, only after a failure.
  template <class Work, class PeerError>
  void run_and_agree(Work&& work, PeerError&& peer_error) {
    auto& self = static_cast<Derived&>(*this);
    std::exception_ptr error;
    try {
      std::forward<Work>(work)();
    } catch (...) {
      error = std::current_exception();
    }
    const bool any_failed = self.world_size() > 1 && self.reduce_boolean_decision(error != nullptr, /*all=*/false);
    if constexpr (std::is_invocable_v<PeerError&, const std::string&>) {
      if (any_failed) {
        const std::string text = failure_text_of_first_failed_rank(self, error);
        if (error) std::rethrow_exception(error);
        throw std::forward<PeerError>(peer_error)(text);
      }
    }
    if (error) std::rethrow_exception(error);
    if constexpr (!std::is_invocable_v<PeerError&, const std::string&>) {
      static_assert(std::is_invocable_v<PeerError&>,
                    "volt: run_and_agree's peer_error is called with no argument or with the failed rank's text");
      if (any_failed) throw std::forward<PeerError>(peer_error)();
    }
  }

 private:
  /// The what() of the lowest-numbered rank whose work threw (`error` is this rank's exception, or null), on
  /// every rank: an all-reduce (min) of the failed ranks, then broadcast_string from that rank. Collectives.
  static std::string failure_text_of_first_failed_rank(Derived& self, const std::exception_ptr& error) {
    std::string text;
    if (error) {
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& caught) {
        text = caught.what();
      } catch (...) {
      }
      if (text.empty()) text = "unknown error";
    }
    auto failed_rank = torch::tensor({static_cast<std::int64_t>(error ? self.global_rank() : self.world_size())},
                                     torch::TensorOptions().device(self.root_device()));
    self.all_reduce(failed_rank, ReduceOp::min);
    const int root = static_cast<int>(failed_rank.cpu().template item<std::int64_t>());
    return broadcast_string(self, text, root);
  }
};

}  // namespace detail
}  // namespace volt

/// \file
/// volt::ProcessGroup: a c10d process group (Gloo on CPU, NCCL on CUDA) behind a small interface.
///
/// It covers the TCPStore rendezvous, collectives (all_reduce, broadcast, all_gather, barrier) and failure
/// notes that let every rank name the rank that failed.
///
/// Availability is decided when volt is compiled: c10d's headers must come with LibTorch (they do in Debian's
/// and PyPI's builds), Gloo needs gloo's headers (Debian: libgloo-dev; PyPI's wheel does not ship them, so point
/// the include path at a copy), NCCL needs VOLT_WITH_CUDA and nccl.h. What is missing gives a clear error at run
/// time, when a distributed run asks for it, and never breaks the single-device build.
#pragma once

#include <volt/core/compat.hpp>
#include <volt/core/errors.hpp>
#include <volt/core/linkage.hpp>
#include <volt/core/log.hpp>
#include <volt/distributed/environment.hpp>
#include <volt/distributed/heartbeat.hpp>
#include <volt/distributed/rendezvous.hpp>
#include <volt/strategies/strategy.hpp>

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

// VOLT_DETAIL_HAS_C10D/GLOO/NCCL and LibTorch's USE_C10D_GLOO/NCCL (which the Gloo and NCCL headers need) are
// defined by volt/core/compat.hpp, included above, so they precede these includes in every include order.
#ifdef VOLT_DETAIL_HAS_C10D
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#endif
#ifdef VOLT_DETAIL_HAS_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#ifdef VOLT_DETAIL_HAS_NCCL
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace volt {

/// Thrown when the rendezvous or a collective fails or times out, or a peer rank reported a failure; also
/// when a backend the run needs is missing from this build. The message names this rank and, when known,
/// the rank that failed first.
class DistributedError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Which c10d backends this build of volt can create.
struct DistributedSupport {
  bool c10d = false;  ///< LibTorch's c10d headers were found: ProcessGroup exists (else DDP is unavailable).
  bool gloo = false;  ///< The Gloo backend (DDP on the CPU) was compiled in.
  bool nccl = false;  ///< The NCCL backend (DDP on CUDA) was compiled in (needs VOLT_WITH_CUDA and nccl.h).
};

/// What this translation unit was compiled with (fixed at compile time; see the file comment).
inline constexpr DistributedSupport distributed_support() {
  DistributedSupport support;
#ifdef VOLT_DETAIL_HAS_C10D
  support.c10d = true;
#endif
#ifdef VOLT_DETAIL_HAS_GLOO
  support.gloo = true;
#endif
#ifdef VOLT_DETAIL_HAS_NCCL
  support.nccl = true;
#endif
  return support;
}

#ifdef VOLT_DETAIL_HAS_C10D

/// One process group of a distributed run. Every member must call the collectives in the same order.
/// Collective calls throw DistributedError naming this rank, the operation and, when a peer left a failure
/// note, the failed rank and its error; after abort() every collective throws DistributedError at once.
/// Not thread-safe: one thread per rank issues the collectives.
class ProcessGroup {
  /// c10d's backend class: Backend since LibTorch 2.0, ProcessGroup before.
  using BackendBase =
#ifdef VOLT_DETAIL_HAS_GLOO
      std::conditional_t<std::is_base_of_v<c10d::Backend, c10d::ProcessGroupGloo>, c10d::Backend, c10d::ProcessGroup>;
#else
      c10d::Backend;
#endif
 public:
  /// The work handle of a started collective (c10d's), what all_reduce_async returns.
  using WorkHandle = decltype(std::declval<BackendBase&>().allreduce(std::declval<std::vector<torch::Tensor>&>()));

  /// Joins the run described by `environment`: rank 0 hosts the TCPStore at main_address:main_port, every rank
  /// connects, then the backend for `device` is created (NCCL for CUDA, Gloo otherwise). Waits at most
  /// `timeout` for the other ranks; throws DistributedError saying who was waited for when they do not come,
  /// or when the backend `device` needs was not compiled in. Every rank of the run must construct one.
  ProcessGroup(const ClusterEnvironment& environment, torch::Device device, std::chrono::milliseconds timeout);

  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  /// This process's global rank in the group.
  int rank() const { return rank_; }
  /// The number of ranks (the world size).
  int size() const { return size_; }
  /// The device the group was created for (this rank's device; NCCL for CUDA, Gloo otherwise).
  torch::Device device() const { return device_; }
  /// "gloo" or "nccl" (Lightning's distributed_backend).
  const std::string& backend_name() const { return backend_name_; }

  /// Whether the backend averages in the collective itself (NCCL's AVG: no division kernel of volt's), so that
  /// all_reduce_async accepts ReduceOp::mean. Gloo has no AVG.
  bool averages_in_collective() const { return is_nccl_; }

  /// Starts an in-place all-reduce of `tensors` (on the group's device) and returns its work handle; complete
  /// it with wait(). `op` is ReduceOp::sum, or ReduceOp::mean where averages_in_collective() (floating-point
  /// tensors). A collective: every rank must start the same all-reduce in the same order. Throws
  /// std::invalid_argument for another op, DistributedError when the backend refuses it.
  WorkHandle all_reduce_async(std::vector<torch::Tensor>& tensors, ReduceOp op = ReduceOp::sum);

  /// Waits for a work handle returned by all_reduce_async; throws DistributedError on failure or timeout.
  /// With NCCL it makes the current CUDA stream wait for the collective and returns without blocking the
  /// host (NCCL's watchdog enforces the timeout); with Gloo it blocks for at most the group's timeout.
  /// `what` names the operation in the error message.
  template <class Work>
  void wait(Work& work, const char* what = "all_reduce") {
    guarded(what, [&] {
      if (is_nccl_) {
        // NCCL: waiting makes the current CUDA stream wait for the collective, without blocking the host; a
        // timeout argument would make it spin on the host until the GPU finishes (no overlap). NCCL's watchdog
        // enforces the group's timeout instead.
        work->wait();
      } else {
        work->wait(timeout_);
      }
      return 0;
    });
  }

  /// In-place all-reduce of `tensor`, waited for. Mean is a sum followed by a division by the world size
  /// (Lightning's reduction for Gloo; integer tensors are divided and copied back, truncating).
  /// A collective: every rank must call it with a tensor of the same shape and dtype. Throws
  /// DistributedError.
  void all_reduce(torch::Tensor& tensor, ReduceOp op = ReduceOp::sum);

  /// In-place broadcast of `tensor` from rank `root`, waited for: afterwards every rank holds root's values.
  /// A collective: every rank must call it with a tensor of the same shape and dtype. Throws
  /// DistributedError.
  void broadcast(torch::Tensor& tensor, int root = 0);

  /// Every rank's `tensor` (same shape on all ranks), in rank order, waited for. A collective: every rank
  /// must call it. Throws DistributedError.
  std::vector<torch::Tensor> all_gather(const torch::Tensor& tensor);

  /// Returns when every rank has called barrier() (a one-element all-reduce, which works on every backend).
  /// A collective; throws DistributedError.
  void barrier();

  /// Leaves a note in the store that this rank failed with `message`, so that the other ranks can name it
  /// (unless another rank already left one: the first failure is usually the cause of the others).
  /// Called by the failing rank alone; never throws (a store that is gone already is ignored).
  void note_failure(const std::string& message) noexcept;

  /// The failure note a rank left with note_failure, e.g. `"rank 1: <message>"`; empty when there is none
  /// or the store cannot be reached.
  std::string failure_note() noexcept;

  /// After a collective failed without a failure note: the ranks that are gone (detail::Heartbeat::lost_ranks).
  std::string missing_ranks() noexcept;

  /// Drops the backend so peers blocked on this rank see a closed connection instead of waiting for the timeout.
  /// This rank's later collectives throw DistributedError. Never throws.
  void abort() noexcept;

 private:
  /// An exception's message without LibTorch's backtrace.
  static std::string error_text(const std::exception& error);

  static std::string seconds(std::chrono::milliseconds timeout);

  template <class F>
  auto guarded(const char* what, F&& call) -> decltype(call()) {
    if (!backend_) {
      throw DistributedError("volt: rank " + std::to_string(rank_) + ": the process group was aborted; " + what +
                             " is not possible");
    }
    try {
      return call();
    } catch (const DistributedError&) {
      throw;
    } catch (const std::exception& error) {
      fail(what, error);
    }
  }

  /// After a collective `what` threw `error`: aborts the group and throws DistributedError naming this rank,
  /// the failed rank when a peer left a note (or the ranks that are gone), and the backend's message.
  [[noreturn]] void fail(const char* what, const std::exception& error);

  int rank_;
  int size_;
  torch::Device device_;
  std::chrono::milliseconds timeout_;
  std::string backend_name_;
  bool is_nccl_ = false;
  c10::intrusive_ptr<c10d::Store> store_;
  /// Declared after the store: stopped first.
  std::unique_ptr<detail::Heartbeat> heartbeat_;
  c10::intrusive_ptr<BackendBase> backend_;
};

#else

/// Placeholder when LibTorch was built without c10d: creating one throws DistributedError.
class ProcessGroup {
 public:
  /// Always throws DistributedError ("this LibTorch has no c10d").
  ProcessGroup(const ClusterEnvironment&, torch::Device, std::chrono::milliseconds) {
    throw DistributedError("volt: this LibTorch has no c10d (built without USE_DISTRIBUTED); DDP is not available");
  }
  /// 0 (never reached: no placeholder object can be created).
  int rank() const { return 0; }
  /// 1 (never reached: no placeholder object can be created).
  int size() const { return 1; }
};

#endif

}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/distributed/impl/process_group.ipp>
#endif

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
 public:
  /// Joins the run described by `environment`: rank 0 hosts the TCPStore at main_address:main_port, every rank
  /// connects, then the backend for `device` is created (NCCL for CUDA, Gloo otherwise). Waits at most
  /// `timeout` for the other ranks; throws DistributedError saying who was waited for when they do not come,
  /// or when the backend `device` needs was not compiled in. Every rank of the run must construct one.
  ProcessGroup(const ClusterEnvironment& environment, torch::Device device, std::chrono::milliseconds timeout)
      : rank_(environment.global_rank), size_(environment.world_size), device_(device), timeout_(timeout) {
    c10d::TCPStoreOptions options;
    options.port = static_cast<std::uint16_t>(environment.main_port);
    options.isServer = environment.global_rank == 0;
    options.numWorkers = static_cast<std::size_t>(environment.world_size);
    options.timeout = timeout;
    const std::string where = environment.main_address + ":" + std::to_string(environment.main_port);
    const auto rendezvous_error = [&](const std::string& why) {
      return DistributedError("volt: rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
                              " could not complete the rendezvous at " + where + " within " + seconds(timeout) +
                              " (are all " + std::to_string(size_) +
                              " processes started, and is the address reachable?): " + why);
    };
    try {
      auto store = detail::join_rendezvous(environment, options, timeout,
                                           [&](const std::string& why) { throw rendezvous_error(why); });
      heartbeat_ = std::make_unique<detail::Heartbeat>(environment.main_address, store->getPort(), rank_);
      store_ = std::move(store);
    } catch (const DistributedError&) {
      throw;
    } catch (const std::exception& error) {
      throw rendezvous_error(error_text(error));
    }
    if (device.is_cuda()) {
#ifdef VOLT_DETAIL_HAS_NCCL
      backend_name_ = "nccl";
      is_nccl_ = true;
      auto nccl_options = c10d::ProcessGroupNCCL::Options::create();
      nccl_options->timeout = timeout;
      backend_ = c10::make_intrusive<c10d::ProcessGroupNCCL>(store_, rank_, size_, nccl_options);
#else
      throw DistributedError("volt: DDP on CUDA needs the NCCL backend, but this build of volt has none (compile with "
                             "VOLT_WITH_CUDA and nccl.h on the include path)");
#endif
    } else {
#ifdef VOLT_DETAIL_HAS_GLOO
      backend_name_ = "gloo";
      auto gloo_options = c10d::ProcessGroupGloo::Options::create(timeout);
      if (auto interface = detail::env("GLOO_SOCKET_IFNAME")) {
        gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(*interface));
      } else if (environment.main_address.rfind("127.", 0) == 0 || environment.main_address == "localhost") {
        gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
      } else {
        gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
      }
      gloo_options->threads = 2;
      try {
        backend_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store_, rank_, size_, gloo_options);
      } catch (const std::exception& error) {
        throw DistributedError("volt: rank " + std::to_string(rank_) + " could not connect the Gloo process group of " +
                               std::to_string(size_) + " ranks within " + seconds(timeout) + ": " + error_text(error));
      }
#else
      throw DistributedError("volt: DDP on the CPU needs the Gloo backend, but gloo's headers were not found when "
                             "volt was compiled (Debian: apt install libgloo-dev)");
#endif
    }
  }

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
  auto all_reduce_async(std::vector<torch::Tensor>& tensors, ReduceOp op = ReduceOp::sum) {
    c10d::AllreduceOptions options;
    if (op == ReduceOp::mean && averages_in_collective()) {
      options.reduceOp = c10d::ReduceOp::AVG;
    } else if (op == ReduceOp::sum) {
      options.reduceOp = c10d::ReduceOp::SUM;
    } else {
      throw std::invalid_argument("volt: ProcessGroup::all_reduce_async takes ReduceOp::sum, or ReduceOp::mean on a "
                                  "backend that averages in the collective (NCCL); this group is " + backend_name_ +
                                  ": use sum and divide, or the blocking all_reduce");
    }
    return guarded("all_reduce", [&] { return backend_->allreduce(tensors, options); });
  }

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
  void all_reduce(torch::Tensor& tensor, ReduceOp op = ReduceOp::sum) {
    std::vector<torch::Tensor> tensors{tensor};
    c10d::AllreduceOptions options;
    switch (op) {
      case ReduceOp::max: options.reduceOp = c10d::ReduceOp::MAX; break;
      case ReduceOp::min: options.reduceOp = c10d::ReduceOp::MIN; break;
      case ReduceOp::product: options.reduceOp = c10d::ReduceOp::PRODUCT; break;
      case ReduceOp::sum:
      case ReduceOp::mean: options.reduceOp = c10d::ReduceOp::SUM; break;
    }
    auto work = guarded("all_reduce", [&] { return backend_->allreduce(tensors, options); });
    wait(work);
    if (op == ReduceOp::mean) {
      if (tensor.is_floating_point() || tensor.is_complex()) {
        tensor.div_(size_);
      } else {
        tensor.copy_(tensor.div(size_, "trunc"));
      }
    }
  }

  /// In-place broadcast of `tensor` from rank `root`, waited for: afterwards every rank holds root's values.
  /// A collective: every rank must call it with a tensor of the same shape and dtype. Throws
  /// DistributedError.
  void broadcast(torch::Tensor& tensor, int root = 0) {
    std::vector<torch::Tensor> tensors{tensor};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    options.rootTensor = 0;
    auto work = guarded("broadcast", [&] { return backend_->broadcast(tensors, options); });
    wait(work, "broadcast");
  }

  /// Every rank's `tensor` (same shape on all ranks), in rank order, waited for. A collective: every rank
  /// must call it. Throws DistributedError.
  std::vector<torch::Tensor> all_gather(const torch::Tensor& tensor) {
    std::vector<torch::Tensor> inputs{tensor.contiguous()};
    std::vector<std::vector<torch::Tensor>> outputs(1);
    for (int i = 0; i < size_; ++i) outputs[0].push_back(torch::empty_like(inputs[0]));
    auto work = guarded("all_gather", [&] { return backend_->allgather(outputs, inputs); });
    wait(work, "all_gather");
    return outputs[0];
  }

  /// Returns when every rank has called barrier() (a one-element all-reduce, which works on every backend).
  /// A collective; throws DistributedError.
  void barrier() {
    auto token = torch::zeros({1}, torch::TensorOptions().device(device_));
    all_reduce(token);
  }

  /// Leaves a note in the store that this rank failed with `message`, so that the other ranks can name it
  /// (unless another rank already left one: the first failure is usually the cause of the others).
  /// Called by the failing rank alone; never throws (a store that is gone already is ignored).
  void note_failure(const std::string& message) noexcept {
    try {
      if (store_->check({"volt/failed"})) return;  // the first failure is the one to name
      const std::string text = "rank " + std::to_string(rank_) + ": " + message;
      store_->set("volt/failed", std::vector<std::uint8_t>(text.begin(), text.end()));
    } catch (...) {
      // the store may be gone with rank 0: nothing more to tell
    }
  }

  /// The failure note a rank left with note_failure, e.g. `"rank 1: <message>"`; empty when there is none
  /// or the store cannot be reached.
  std::string failure_note() noexcept {
    try {
      if (!store_->check({"volt/failed"})) return {};
      const auto bytes = store_->get("volt/failed");
      return std::string(bytes.begin(), bytes.end());
    } catch (...) {
      return {};
    }
  }

  /// After a collective failed without a failure note: the ranks that are gone (detail::Heartbeat::lost_ranks).
  std::string missing_ranks() noexcept { return detail::Heartbeat::lost_ranks(*store_, size_, rank_); }

  /// Drops the backend so peers blocked on this rank see a closed connection instead of waiting for the timeout.
  /// This rank's later collectives throw DistributedError. Never throws.
  void abort() noexcept {
    try {
#ifdef VOLT_DETAIL_HAS_NCCL
      if (auto* nccl = dynamic_cast<c10d::ProcessGroupNCCL*>(backend_.get())) nccl->abort();
#endif
      backend_.reset();
    } catch (...) {
    }
  }

 private:
  using BackendBase =
#ifdef VOLT_DETAIL_HAS_GLOO
      std::conditional_t<std::is_base_of_v<c10d::Backend, c10d::ProcessGroupGloo>, c10d::Backend, c10d::ProcessGroup>;
#else
      c10d::Backend;
#endif

  /// An exception's message without LibTorch's backtrace.
  static std::string error_text(const std::exception& error) {
    if (const auto* c10_error = dynamic_cast<const c10::Error*>(&error)) return c10_error->what_without_backtrace();
    return error.what();
  }

  static std::string seconds(std::chrono::milliseconds timeout) {
    return std::to_string(timeout.count() / 1000) + " s";
  }

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
      std::string message = "volt: " + std::string(what) + " failed on rank " + std::to_string(rank_) + " of " +
                            std::to_string(size_) + " (" + backend_name_ + ")";
      // The group is unusable now; dropping it lets the collectives of the ranks still waiting on this one fail
      // sooner.
      abort();
      std::string note = failure_note();
      if (note.empty()) {
        const std::string lost = missing_ranks();
        note = failure_note();  // a rank may have noted its failure meanwhile
        if (note.empty()) {
          message += ": " + (lost.empty() ? "a peer process exited or did not answer within " + seconds(timeout_) : lost);
        }
      }
      if (!note.empty()) message += ": DDP " + note;
      message += " [" + error_text(error) + "]";
      throw DistributedError(message);
    }
  }

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

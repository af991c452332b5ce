/// \file
/// Definitions of the functions declared in volt/distributed/process_group.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

#ifdef VOLT_DETAIL_HAS_C10D

namespace volt {

VOLT_INLINE ProcessGroup::ProcessGroup(const ClusterEnvironment& environment, torch::Device device,
                                       std::chrono::milliseconds timeout)
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

VOLT_INLINE ProcessGroup::WorkHandle ProcessGroup::all_reduce_async(std::vector<torch::Tensor>& tensors, ReduceOp op) {
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

VOLT_INLINE void ProcessGroup::all_reduce(torch::Tensor& tensor, ReduceOp op) {
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

VOLT_INLINE void ProcessGroup::broadcast(torch::Tensor& tensor, int root) {
  std::vector<torch::Tensor> tensors{tensor};
  c10d::BroadcastOptions options;
  options.rootRank = root;
  options.rootTensor = 0;
  auto work = guarded("broadcast", [&] { return backend_->broadcast(tensors, options); });
  wait(work, "broadcast");
}

VOLT_INLINE std::vector<torch::Tensor> ProcessGroup::all_gather(const torch::Tensor& tensor) {
  std::vector<torch::Tensor> inputs{tensor.contiguous()};
  std::vector<std::vector<torch::Tensor>> outputs(1);
  for (int i = 0; i < size_; ++i) outputs[0].push_back(torch::empty_like(inputs[0]));
  auto work = guarded("all_gather", [&] { return backend_->allgather(outputs, inputs); });
  wait(work, "all_gather");
  return outputs[0];
}

VOLT_INLINE void ProcessGroup::barrier() {
  auto token = torch::zeros({1}, torch::TensorOptions().device(device_));
  all_reduce(token);
}

VOLT_INLINE void ProcessGroup::note_failure(const std::string& message) noexcept {
  try {
    if (store_->check({"volt/failed"})) return;  // the first failure is the one to name
    const std::string text = "rank " + std::to_string(rank_) + ": " + message;
    store_->set("volt/failed", std::vector<std::uint8_t>(text.begin(), text.end()));
  } catch (...) {
    // the store may be gone with rank 0: nothing more to tell
  }
}

VOLT_INLINE std::string ProcessGroup::failure_note() noexcept {
  try {
    if (!store_->check({"volt/failed"})) return {};
    const auto bytes = store_->get("volt/failed");
    return std::string(bytes.begin(), bytes.end());
  } catch (...) {
    return {};
  }
}

VOLT_INLINE std::string ProcessGroup::missing_ranks() noexcept {
  return detail::Heartbeat::lost_ranks(*store_, size_, rank_);
}

VOLT_INLINE void ProcessGroup::abort() noexcept {
  try {
#ifdef VOLT_DETAIL_HAS_NCCL
    if (auto* nccl = dynamic_cast<c10d::ProcessGroupNCCL*>(backend_.get())) nccl->abort();
#endif
    backend_.reset();
  } catch (...) {
  }
}

VOLT_INLINE std::string ProcessGroup::error_text(const std::exception& error) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&error)) return c10_error->what_without_backtrace();
  return error.what();
}

VOLT_INLINE std::string ProcessGroup::seconds(std::chrono::milliseconds timeout) {
  return std::to_string(timeout.count() / 1000) + " s";
}

VOLT_INLINE void ProcessGroup::fail(const char* what, const std::exception& error) {
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

}  // namespace volt

#endif

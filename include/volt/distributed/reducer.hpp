/// \file
/// volt::detail::GradientReducer: data-parallel gradient averaging on a c10d process group; no public API.
///
/// It does what PyTorch's DistributedDataParallel does in Python (LibTorch's C++ frontend has no DDP module).
/// Parameters are grouped into buckets of about 25 MB, in reverse registration order (the order in which
/// backward produces their gradients). A post-hook on each parameter's gradient accumulator notes the finished
/// gradient; when the last gradient of a bucket arrives, the bucket's flat buffer is filled from all of them with
/// one kernel (a cat into it), averaged (by the collective itself on NCCL, one division elsewhere) and its
/// all-reduce starts at once, so communication overlaps the rest of backward. finish() waits for every bucket
/// (launching those whose parameters got no gradient, with zeros) and copies the averages back into the
/// parameters' .grad with one multi-tensor copy per bucket.
/// Backward passes prepared with sync = false (accumulation micro-batches: Lightning's no_sync) do nothing.
///
/// Work on the compute stream per synchronised step: per bucket one cat, at most one division, one
/// multi-tensor copy back; no device memory is allocated per step (the flat buffers and their views are kept).
/// The gradients cannot simply be views of the bucket (as in PyTorch's DDP): LibTorch's Optimizer::zero_grad
/// calls detach_() on them, which a view refuses.
#pragma once

#include <volt/core/compat.hpp>
#include <volt/distributed/process_group.hpp>

#include <torch/torch.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace volt::detail {

#ifdef VOLT_DETAIL_HAS_C10D

class GradientReducer {
 public:
  /// Default bucket capacity (PyTorch DDP's bucket_cap_mb = 25).
  static constexpr std::int64_t default_bucket_bytes = 25 * 1024 * 1024;

  GradientReducer(ProcessGroup& group, std::vector<torch::Tensor> parameters,
                  std::int64_t bucket_bytes = default_bucket_bytes)
      : core_(std::make_shared<Core>(group)) {
    auto& core = *core_;
    for (auto& parameter : parameters) {
      if (parameter.requires_grad()) core.parameters.push_back(parameter);
    }
    // Buckets in reverse order, split by size, dtype and device.
    const auto count = static_cast<std::int64_t>(core.parameters.size());
    core.slot_of.assign(static_cast<std::size_t>(count), {});
    for (std::int64_t i = count - 1; i >= 0; --i) {
      const auto& parameter = core.parameters[static_cast<std::size_t>(i)];
      const std::int64_t bytes = parameter.numel() * static_cast<std::int64_t>(parameter.element_size());
      const bool start_new = core.buckets.empty() ||
                             core.buckets.back().bytes + bytes > bucket_bytes ||
                             core.buckets.back().dtype != parameter.scalar_type() ||
                             core.buckets.back().device != parameter.device();
      if (start_new) {
        Bucket bucket;
        bucket.dtype = parameter.scalar_type();
        bucket.device = parameter.device();
        core.buckets.push_back(std::move(bucket));
      }
      auto& bucket = core.buckets.back();
      core.slot_of[static_cast<std::size_t>(i)] = {static_cast<std::int64_t>(core.buckets.size()) - 1,
                                                    static_cast<std::int64_t>(bucket.members.size()), bucket.numel};
      bucket.members.push_back(i);
      bucket.numel += parameter.numel();
      bucket.bytes += bytes;
    }
    // The flat buffers and their views are made once: a step then only fills, reduces and copies back.
    for (auto& bucket : core.buckets) {
      bucket.flat = torch::zeros({bucket.numel}, torch::TensorOptions().dtype(bucket.dtype).device(bucket.device));
      bucket.collective = {bucket.flat};
      bucket.arrived.assign(bucket.members.size(), torch::Tensor());
      for (auto member : bucket.members) {
        const auto i = static_cast<std::size_t>(member);
        const auto& parameter = core.parameters[i];
        bucket.averaged.push_back(
            bucket.flat.narrow(0, core.slot_of[i].offset, parameter.numel()).view(parameter.sizes()));
      }
    }
    // Hooks on the gradient accumulators; the accumulators are kept alive so the hooks stay attached.
    for (std::int64_t i = 0; i < count; ++i) {
      auto accumulator = torch::autograd::impl::grad_accumulator(core.parameters[static_cast<std::size_t>(i)]);
      accumulator->add_post_hook(std::make_unique<Hook>(core_, i));
      accumulators_.push_back(std::move(accumulator));
    }
  }

  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  ~GradientReducer() { core_->alive.store(false); }

  /// Arms the hooks for the next backward pass: with sync = false they do nothing (no_sync).
  void prepare_for_backward(bool sync) {
    auto& core = *core_;
    std::lock_guard lock(core.mutex);
    core.sync = sync;
    for (auto& bucket : core.buckets) {
      bucket.pending = static_cast<std::int64_t>(bucket.members.size());
      bucket.launched = false;
      bucket.work.reset();
    }
    core.ready.assign(core.parameters.size(), false);
    core.next_launch = 0;
  }

  /// After a synchronised backward: completes every bucket's all-reduce and writes the averaged gradients
  /// into the parameters' .grad (one multi-tensor copy per bucket). Throws DistributedError when a collective
  /// fails.
  void finish() {
    auto& core = *core_;
    std::unique_lock lock(core.mutex);
    if (!core.sync) return;
    for (std::size_t b = core.next_launch; b < core.buckets.size(); ++b) {
      if (!core.buckets[b].launched) core.launch_missing(b);
    }
    core.next_launch = core.buckets.size();
    for (auto& bucket : core.buckets) {
      if (bucket.work) core.group->wait(*bucket.work);
    }
    auto& destinations = core.copy_destinations;
    auto& sources = core.copy_sources;
    for (auto& bucket : core.buckets) {
      destinations.clear();
      sources.clear();
      for (std::size_t m = 0; m < bucket.members.size(); ++m) {
        auto& parameter = core.parameters[static_cast<std::size_t>(bucket.members[m])];
        if (parameter.grad().defined()) {
          destinations.push_back(parameter.mutable_grad());
          sources.push_back(bucket.averaged[m]);
        } else {
          parameter.mutable_grad() = bucket.averaged[m].clone();
        }
      }
      compat::foreach_copy_(destinations, sources);
      bucket.work.reset();
    }
    destinations.clear();  // no reference to the gradients past this step
    sources.clear();
    core.sync = false;
  }

  std::size_t bucket_count() const { return core_->buckets.size(); }
  /// The parameter indices (registration order) of each bucket, first bucket first.
  std::vector<std::vector<std::int64_t>> bucket_members() const {
    std::vector<std::vector<std::int64_t>> result;
    for (const auto& bucket : core_->buckets) result.push_back(bucket.members);
    return result;
  }

 private:
  using Work = std::remove_cvref_t<decltype(std::declval<ProcessGroup&>().all_reduce_async(
      std::declval<std::vector<torch::Tensor>&>()))>;

  struct Bucket {
    torch::ScalarType dtype = torch::kFloat;
    torch::Device device = torch::kCPU;
    std::vector<std::int64_t> members;
    std::int64_t numel = 0;
    std::int64_t bytes = 0;
    torch::Tensor flat;
    std::vector<torch::Tensor> collective;  ///< {flat}, the all-reduce's argument
    std::vector<torch::Tensor> averaged;    ///< per member, its part of flat shaped like the parameter
    std::vector<torch::Tensor> arrived;     ///< per member, its gradient flattened, until the bucket is filled
    std::int64_t pending = 0;
    bool launched = false;
    std::optional<Work> work;
  };
  struct Slot {
    std::int64_t bucket = 0;
    std::int64_t index = 0;
    std::int64_t offset = 0;
  };

  struct Core {
    explicit Core(ProcessGroup& g) : group(&g) {}
    ProcessGroup* group;
    std::vector<torch::Tensor> parameters;
    std::vector<Slot> slot_of;
    std::vector<Bucket> buckets;
    std::vector<bool> ready;
    std::vector<torch::Tensor> copy_destinations, copy_sources;  // finish()'s lists, kept to reuse their storage
    bool sync = false;
    std::size_t next_launch = 0;
    std::atomic<bool> alive{true};
    std::mutex mutex;

    /// Keeps parameter i's current gradient, flattened, for its bucket (undefined: the bucket gets zeros).
    void note_gradient(std::size_t i) {
      const auto& slot = slot_of[i];
      const auto& grad = parameters[i].grad();
      // reshape is a view for a contiguous gradient (no kernel); a strided one is copied.
      buckets[static_cast<std::size_t>(slot.bucket)].arrived[static_cast<std::size_t>(slot.index)] =
          grad.defined() ? grad.reshape({-1}) : torch::Tensor();
      ready[i] = true;
    }

    /// Fills the bucket from the gradients noted, averages it and starts its all-reduce.
    void launch(std::size_t b) {
      auto& bucket = buckets[b];
      bool complete = true;
      for (const auto& gradient : bucket.arrived) complete = complete && gradient.defined();
      if (complete) {
        at::cat_out(bucket.flat, bucket.arrived);  // one kernel for the whole bucket
      } else {
        for (std::size_t m = 0; m < bucket.members.size(); ++m) {
          auto slice = bucket.averaged[m].view({-1});
          if (bucket.arrived[m].defined()) {
            slice.copy_(bucket.arrived[m]);
          } else {
            slice.zero_();
          }
        }
      }
      for (auto& gradient : bucket.arrived) gradient = torch::Tensor();  // no reference past this step
      if (group->averages_in_collective()) {
        bucket.work = group->all_reduce_async(bucket.collective, ReduceOp::mean);
      } else {
        bucket.flat.div_(group->size());
        bucket.work = group->all_reduce_async(bucket.collective);
      }
      bucket.launched = true;
    }

    void launch_missing(std::size_t b) {
      for (auto member : buckets[b].members) {
        const auto i = static_cast<std::size_t>(member);
        if (!ready[i]) note_gradient(i);
      }
      launch(b);
    }

    void on_gradient(std::int64_t index) {
      std::lock_guard lock(mutex);
      if (!sync) return;
      const auto i = static_cast<std::size_t>(index);
      if (ready[i]) return;
      note_gradient(i);
      --buckets[static_cast<std::size_t>(slot_of[i].bucket)].pending;
      // Buckets start in index order on every rank, so the ranks' collectives pair up.
      while (next_launch < buckets.size() && buckets[next_launch].pending == 0) {
        if (!buckets[next_launch].launched) launch(next_launch);
        ++next_launch;
      }
    }
  };

  struct Hook : torch::autograd::FunctionPostHook {
    Hook(std::weak_ptr<Core> core, std::int64_t index) : core_(std::move(core)), index_(index) {}
    torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                              const torch::autograd::variable_list& /*inputs*/) override {
      if (auto core = core_.lock(); core && core->alive.load()) core->on_gradient(index_);
      return outputs;
    }
    std::weak_ptr<Core> core_;
    std::int64_t index_;
  };

  std::shared_ptr<Core> core_;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
};

#endif

}  // namespace volt::detail

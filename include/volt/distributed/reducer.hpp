/// \file
/// volt::detail::GradientReducer: data-parallel gradient averaging on a c10d process group; no public API.
///
/// It does what PyTorch's DistributedDataParallel does in Python (LibTorch's C++ frontend has no DDP module).
/// Parameters are grouped into buckets of about 25 MB, in reverse registration order (the order in which
/// backward produces their gradients). A post-hook on each parameter's gradient accumulator copies the finished
/// gradient into its bucket; when a bucket is full it is divided by the world size and its all-reduce starts at
/// once, so communication overlaps the rest of backward. finish() waits for every bucket (launching those whose
/// parameters got no gradient, with zeros) and copies the averages back into the parameters' .grad.
/// Backward passes prepared with sync = false (accumulation micro-batches: Lightning's no_sync) do nothing.
#pragma once

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
    for (auto& bucket : core.buckets) {
      bucket.flat = torch::zeros({bucket.numel}, torch::TensorOptions().dtype(bucket.dtype).device(bucket.device));
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
  /// into the parameters' .grad. Throws DistributedError when a collective fails.
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
    for (auto& bucket : core.buckets) {
      for (std::size_t m = 0; m < bucket.members.size(); ++m) {
        const auto i = static_cast<std::size_t>(bucket.members[m]);
        auto& parameter = core.parameters[i];
        const auto offset = core.slot_of[i].offset;
        auto averaged = bucket.flat.narrow(0, offset, parameter.numel()).view(parameter.sizes());
        if (parameter.grad().defined()) {
          parameter.mutable_grad().copy_(averaged);
        } else {
          parameter.mutable_grad() = averaged.clone();
        }
      }
      bucket.work.reset();
    }
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
    bool sync = false;
    std::size_t next_launch = 0;
    std::atomic<bool> alive{true};
    std::mutex mutex;

    void launch(std::size_t b) {
      auto& bucket = buckets[b];
      bucket.flat.div_(group->size());
      std::vector<torch::Tensor> tensors{bucket.flat};
      bucket.work = group->all_reduce_async(tensors);
      bucket.launched = true;
    }

    void launch_missing(std::size_t b) {
      auto& bucket = buckets[b];
      for (auto member : bucket.members) {
        const auto i = static_cast<std::size_t>(member);
        if (ready[i]) continue;
        auto slice = bucket.flat.narrow(0, slot_of[i].offset, parameters[i].numel());
        const auto& grad = parameters[i].grad();
        if (grad.defined()) {
          slice.copy_(grad.reshape({-1}));
        } else {
          slice.zero_();
        }
        ready[i] = true;
      }
      launch(b);
    }

    void on_gradient(std::int64_t index) {
      std::lock_guard lock(mutex);
      if (!sync) return;
      const auto i = static_cast<std::size_t>(index);
      if (ready[i]) return;
      const auto& slot = slot_of[i];
      auto& bucket = buckets[static_cast<std::size_t>(slot.bucket)];
      const auto& grad = parameters[i].grad();
      auto slice = bucket.flat.narrow(0, slot.offset, parameters[i].numel());
      if (grad.defined()) {
        slice.copy_(grad.reshape({-1}));
      } else {
        slice.zero_();
      }
      ready[i] = true;
      --bucket.pending;
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

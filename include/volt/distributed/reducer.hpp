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
#include <volt/core/linkage.hpp>
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
                  std::int64_t bucket_bytes = default_bucket_bytes);

  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  ~GradientReducer() { core_->alive.store(false); }

  /// Arms the hooks for the next backward pass: with sync = false they do nothing (no_sync).
  void prepare_for_backward(bool sync);

  /// After a synchronised backward: completes every bucket's all-reduce and writes the averaged gradients
  /// into the parameters' .grad (one multi-tensor copy per bucket). Throws DistributedError when a collective
  /// fails.
  void finish();

  std::size_t bucket_count() const { return core_->buckets.size(); }
  /// The parameter indices (registration order) of each bucket, first bucket first.
  std::vector<std::vector<std::int64_t>> bucket_members() const;

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
    void note_gradient(std::size_t i);
    void launch(std::size_t b);
    void launch_missing(std::size_t b);
    void on_gradient(std::int64_t index);
  };

  struct Hook : torch::autograd::FunctionPostHook {
    Hook(std::weak_ptr<Core> core, std::int64_t index) : core_(std::move(core)), index_(index) {}
    torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                              const torch::autograd::variable_list& inputs) override;
    std::weak_ptr<Core> core_;
    std::int64_t index_;
  };

  std::shared_ptr<Core> core_;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
};

#endif

}  // namespace volt::detail

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/distributed/impl/reducer.ipp>
#endif

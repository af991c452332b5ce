/// \file
/// The CUDA graph of the training step (TrainerOptions::cuda_graphs; the loop part is
/// volt/trainer/loops/cuda_graph_step.hpp): the step's static inputs, the captured graph and its replays, and
/// the optimizer step on device-only state that the graph contains. With volt/core/compat.hpp, the only place
/// that tests for CUDA.
///
/// How a step is captured and replayed (docs/cuda-graphs.md tells users): after the warm-up steps (the last
/// one on the capture's side stream, so cuBLAS and cuDNN set up their workspaces there), the batch is copied
/// into static tensors, the gradients are dropped, and forward, backward, the grad scaler's unscale and
/// update, gradient clipping and volt::optim::CapturableStep are captured on the side stream with autocast's
/// weight cache off. Each later batch with the same tensor shapes, dtypes and devices is copied into the
/// static tensors (one multi-tensor copy) and the graph replayed; a batch of other shapes runs eagerly
/// between replays, with the optimizer's state handed to the host and back.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/apply.hpp>
#include <volt/core/compat.hpp>
#include <volt/optim/capturable.hpp>
#include <volt/trainer/connectors/logger_connector.hpp>

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace volt::detail {

/// Whether this build can capture CUDA graphs (VOLT_WITH_CUDA and LibTorch 2.4+).
inline constexpr bool cuda_graphs_compiled = VOLT_DETAIL_HAS_CUDA_GRAPHS != 0;

/// The tensors of `batch`, in the order apply_to_collection visits them.
template <class Batch>
std::vector<torch::Tensor> tensor_leaves(const Batch& batch) {
  std::vector<torch::Tensor> leaves;
  (void)apply_to_collection(batch, [&leaves](const torch::Tensor& tensor) {
    leaves.push_back(tensor);
    return tensor;
  });
  return leaves;
}

/// Whether `a` and `b` hold tensors of the same sizes, dtypes and devices, in the same order.
VOLT_INLINE bool same_tensor_shapes(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b);

/// The Trainer's graph of its training step: state between fit()'s start and end. Without CUDA graph
/// support in the build it stays disabled.
class TrainStepGraph {
 public:
  /// Forgets everything (a new fit()): graph, static tensors, optimizer binding.
  void reset();

  /// Turns capturing on for this fit().
  void enable() { enabled_ = true; }
  /// Turns capturing off for the rest of this fit() (a failed capture); the step runs eagerly.
  void disable();

  bool enabled() const noexcept { return enabled_; }
  bool captured() const noexcept { return captured_; }
  /// Eager optimizer steps taken since fit() started, before the capture.
  std::int64_t eager_steps() const noexcept { return eager_steps_; }
  void count_eager_step() noexcept { ++eager_steps_; }
  /// Replays so far (the captured batch's included).
  std::int64_t replays() const noexcept { return replays_; }
  /// Batches of other shapes that ran eagerly after the capture.
  std::int64_t eager_fallbacks() const noexcept { return eager_fallbacks_; }

  /// The static copy of the batch the graph reads (set by set_static_batch).
  template <class Batch>
  Batch& static_batch() {
    return *static_cast<Batch*>(static_batch_.get());
  }

  /// Clones `batch` into the static tensors the graph will read.
  template <class Batch>
  void set_static_batch(const Batch& batch) {
    auto copy = std::make_shared<Batch>(
        apply_to_collection(batch, [](const torch::Tensor& tensor) { return tensor.clone(); }));
    static_leaves_ = tensor_leaves(*copy);
    static_batch_ = std::move(copy);
  }

  /// Whether `leaves` (a batch's tensors) fit the static tensors.
  bool matches(const std::vector<torch::Tensor>& leaves) const { return same_tensor_shapes(leaves, static_leaves_); }

  /// Copies `leaves` into the static tensors (one multi-tensor copy on the current stream).
  void load(const std::vector<torch::Tensor>& leaves);

  /// Binds the optimizer (it has stepped during the warm-up) and, with a grad scaler, makes the found-inf flag.
  void prepare(torch::optim::Optimizer& optimizer, bool with_scaler, torch::Device device);

  optim::CapturableStep& optimizer_step() { return *step_; }
  /// The grad scaler's found-inf flag (undefined without a scaler).
  torch::Tensor& found_inf() { return found_inf_; }
  /// The ctx.log calls made while capturing.
  std::vector<RecordedLog>& logs() { return logs_; }
  /// The captured step's loss (a graph tensor rewritten by each replay).
  const torch::Tensor& loss() const noexcept { return loss_; }

#if VOLT_DETAIL_HAS_CUDA_GRAPHS
  /// Runs `step` (one eager training step) on the capture's side stream, ordered after the work already
  /// queued on the current stream and before the work queued after it.
  template <class Step>
  void on_side_stream(torch::Device device, Step&& step) {
    const auto current = c10::cuda::getCurrentCUDAStream(device.index());
    if (!side_stream_) side_stream_ = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index());
    wait(*side_stream_, current);
    {
      const c10::cuda::CUDAStreamGuard guard(*side_stream_);
      step();
    }
    wait(current, *side_stream_);
  }

  /// Captures `step` (forward, backward, scaler, clipping, optimizer; it returns the loss) into the graph on the
  /// side stream, then replays it once for the static batch. The gradients of the parameters prepare() bound
  /// are dropped first, so that the graph allocates and owns them. Returns the error text when the capture
  /// failed (the gradients are then dropped, and nothing else changed), or an empty string.
  template <class Step>
  std::string capture(torch::Device device, MetricStore& metrics, Step&& step) {
    const auto& parameters = step_->parameters();
    const auto current = c10::cuda::getCurrentCUDAStream(device.index());
    if (!side_stream_) side_stream_ = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index());
    // The captured backward allocates the gradients in the graph's memory pool; each replay rewrites them.
    drop_gradients(parameters);
    graph_ = std::make_unique<at::cuda::CUDAGraph>();
    logs_.clear();
    std::string error;
    wait(*side_stream_, current);
    {
      const c10::cuda::CUDAStreamGuard guard(*side_stream_);
      const bool cache_was_enabled = compat::autocast_cache_enabled();
      compat::set_autocast_cache_enabled(false);  // casts cached outside the graph must not be used in it
      metrics.record_into(&logs_);
      // A capture that fails inside capture_end() (an operation the capture does not allow invalidates it)
      // leaves the default CUDA generator marked as capturing, and every later random op on the device then
      // throws "Offset increment outside graph capture": its state before the capture is put back then.
      auto generator = at::cuda::detail::getDefaultCUDAGenerator(device.index());
      const at::Generator generator_before = generator.clone();
      try {
        graph_->capture_begin();
        try {
          // Detached: the graph's autograd nodes (and the AccumulateGrad nodes of the parameters, made on the side
          // stream) must not outlive the capture, or eager steps later find nodes of another stream.
          loss_ = step().detach();
        } catch (const std::exception& e) {
          error = e.what();
        } catch (...) {
          error = "unknown exception";
        }
        try {
          graph_->capture_end();
        } catch (const std::exception& e) {
          if (error.empty()) error = e.what();
        }
      } catch (const std::exception& e) {
        error = e.what();
      }
      metrics.record_into(nullptr);
      compat::set_autocast_cache_enabled(cache_was_enabled);
      if (!error.empty()) {
        const std::lock_guard<std::mutex> lock(generator.mutex());
        generator.graphsafe_set_state(generator_before);
      }
    }
    wait(current, *side_stream_);
    if (!error.empty()) {
      drop_gradients(parameters);
      graph_.reset();
      loss_ = torch::Tensor();
      logs_.clear();
      (void)cudaGetLastError();  // a failed capture leaves its error behind
      return error;
    }
    captured_ = true;
    static_gradients_.clear();
    for (const auto& parameter : parameters) static_gradients_.push_back(parameter.grad());
    replay();
    return {};
  }

  /// Replays the graph on the current stream (after refreshing changed learning rates).
  void replay() {
    step_->refresh_learning_rates();
    graph_->replay();
    ++replays_;
  }
#else
  // A build without CUDA graphs never enables the graph (cuda_graphs_compiled is an obstacle).
  template <class Step>
  void on_side_stream(torch::Device /*device*/, Step&& step) {
    step();
  }
  template <class Step>
  std::string capture(torch::Device /*device*/, MetricStore& /*metrics*/, Step&& /*step*/) {
    return "this build cannot capture CUDA graphs";
  }
  void replay() {}
#endif

  /// Before an eager step between replays: hands the optimizer's state to the host.
  void before_eager_step();
  /// After an eager step between replays: takes the optimizer's state back and points each .grad at the
  /// graph's gradient again.
  void after_eager_step();

  /// Writes the device-side optimizer state into LibTorch's (before a checkpoint is written).
  void sync_optimizer_state();

  /// Hands the optimizer state back to the host and frees the graph and its memory.
  void release();

 private:
  static void drop_gradients(const std::vector<torch::Tensor>& parameters);

#if VOLT_DETAIL_HAS_CUDA_GRAPHS
  /// Makes `waiter` wait for the work queued on `queued` so far.
  static void wait(const c10::cuda::CUDAStream& waiter, const c10::cuda::CUDAStream& queued) {
    at::cuda::CUDAEvent event;
    event.record(queued);
    event.block(waiter);
  }

  std::unique_ptr<at::cuda::CUDAGraph> graph_;
  std::optional<c10::cuda::CUDAStream> side_stream_;
#endif
  bool enabled_ = false;
  bool captured_ = false;
  std::int64_t eager_steps_ = 0;
  std::int64_t replays_ = 0;
  std::int64_t eager_fallbacks_ = 0;
  std::unique_ptr<optim::CapturableStep> step_;
  std::shared_ptr<void> static_batch_;  // the Batch of the fit() that set it
  std::vector<torch::Tensor> static_leaves_;
  std::vector<torch::Tensor> static_gradients_;
  std::vector<RecordedLog> logs_;
  torch::Tensor loss_;
  torch::Tensor found_inf_;
};

}  // namespace volt::detail

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/trainer/loops/impl/train_step_graph.ipp>
#endif

/// \file
/// volt::TrainerOptions: the Trainer's flags, with Lightning's defaults and validation.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/accelerators/device_spec.hpp>
#include <volt/core/duration.hpp>
#include <volt/core/errors.hpp>
#include <volt/core/math_modes.hpp>
#include <volt/transfer/memory_format.hpp>
#include <volt/core/python_format.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <variant>

namespace volt {

/// A batch limit or an interval given either as a fraction of an epoch (double in [0, 1]) or as a count
/// of batches (int), like Lightning's `limit_train_batches=0.25` vs `limit_train_batches=10`.
class BatchAmount {
 public:
  /// A fraction of an epoch. Not range-checked here: TrainerOptions validation (at Trainer construction)
  /// refuses values outside [0, 1].
  constexpr BatchAmount(double fraction) : value_(fraction) {}            // NOLINT(google-explicit-constructor)
  /// A number of batches (validated as for the double constructor).
  constexpr BatchAmount(int count) : value_(static_cast<std::int64_t>(count)) {}  // NOLINT
  /// A number of batches (validated as for the double constructor).
  constexpr BatchAmount(std::int64_t count) : value_(count) {}            // NOLINT
  /// Deleted, so that `true` is not silently taken as a count of 1 batch.
  BatchAmount(bool) = delete;

  /// Whether this was given as a fraction (double) rather than a count of batches.
  constexpr bool is_fraction() const { return std::holds_alternative<double>(value_); }
  /// The fraction; throws std::bad_variant_access when this is a count (check is_fraction() first).
  constexpr double fraction() const { return std::get<double>(value_); }
  /// The count; throws std::bad_variant_access when this is a fraction (check is_fraction() first).
  constexpr std::int64_t count() const { return std::get<std::int64_t>(value_); }

  /// Number of batches out of `total`: a fraction gives int(total * f), a count min(total, n).
  std::int64_t of(std::int64_t total) const;
  /// Whether this is the fraction 1.0. A count is never "the whole epoch", even one that covers every batch.
  bool is_whole_epoch() const { return is_fraction() && fraction() == 1.0; }

  /// The value as Lightning prints it in messages: a fraction as Python's repr ("0.25", "1.0",
  /// "0.3333333333333333"), or a count ("10").
  std::string to_string() const { return is_fraction() ? detail::python_float(fraction()) : std::to_string(count()); }

 private:
  std::variant<double, std::int64_t> value_;
};

/// Gradient clipping algorithm (Lightning's gradient_clip_algorithm).
enum class GradClipAlgorithm {
  norm,   ///< Scale all gradients together so their total 2-norm is at most gradient_clip_val (clip_grad_norm_).
  value,  ///< Clamp each gradient element to [-gradient_clip_val, gradient_clip_val] (clip_grad_value_).
};

/// What fit() does when writing a checkpoint fails (disk full, permission denied): `raise` stops the run
/// with volt::CheckpointError (the previous checkpoint file is kept); `warn` logs the error and trains on.
enum class CheckpointFailure {
  raise,  ///< Rethrow the CheckpointError: fit() runs on_exception and teardown and the error reaches the caller.
  warn,   ///< Log the error as a rank-zero warning and continue training.
};

class Profiler;

/// The Trainer's profiler (Lightning's `profiler=`): a name, "simple" (volt::SimpleProfiler) or "pytorch"
/// (volt::PyTorchProfiler) with their default options, or a configured profiler:
/// `.profiler = std::make_shared<volt::SimpleProfiler>(volt::SimpleProfilerOptions{.filename = "perf"})`.
/// Empty: no profiler. See docs/profiling.md.
struct ProfilerChoice {
  /// No profiler.
  ProfilerChoice() = default;
  /// A profiler by name; another name than "simple" and "pytorch" is a MisconfigurationError when the Trainer
  /// is made.
  ProfilerChoice(const char* profiler_name) : name(profiler_name) {}              // NOLINT(google-explicit-constructor)
  /// A profiler by name (as above).
  ProfilerChoice(std::string profiler_name) : name(std::move(profiler_name)) {}   // NOLINT(google-explicit-constructor)
  /// A configured profiler (shared: the caller may read its results after fit).
  template <class P>
  ProfilerChoice(std::shared_ptr<P> configured) : profiler(std::move(configured)) {}  // NOLINT
  /// Whether a profiler is asked for.
  bool empty() const { return name.empty() && !profiler; }

  std::string name{};                   ///< The profiler's name, when given by name.
  std::shared_ptr<Profiler> profiler{};  ///< The profiler, when given as an object.
};

/// Options of volt::Trainer, for designated initializers: `volt::Trainer<> trainer({.max_epochs = 5});`
/// Defaults and meanings are Lightning's (spec section 7); volt::Trainer validates them at construction and
/// throws MisconfigurationError (Lightning's messages) for invalid values.
struct TrainerOptions {
  /// Which devices: DeviceSpec{} is "auto" (the accelerator's auto_device_count()).
  DeviceSpec devices{};
  /// Machines taking part in the run (Lightning's num_nodes): the DDP world size is devices x num_nodes.
  /// Must be >= 1.
  int num_nodes = 1;
  /// Epoch limit; nullopt means 1000 when max_steps is -1 (with a warning), else unlimited. -1: unlimited.
  std::optional<std::int64_t> max_epochs{};
  /// A stop requested through should_stop (e.g. by EarlyStopping) takes effect only once this many epochs
  /// have completed; nullopt: no minimum. Must be >= 0 and <= max_epochs.
  std::optional<std::int64_t> min_epochs{};
  /// Limit on optimizer steps (global_step); -1: none.
  std::int64_t max_steps = -1;
  /// A stop requested through should_stop takes effect only once global_step reaches this; nullopt: no
  /// minimum. Must be >= 0 and <= max_steps when max_steps is set.
  std::optional<std::int64_t> min_steps{};
  /// Stop fit once this much training time has passed (Lightning's max_time): `std::chrono::hours(12)` or
  /// "00:12:00:00" (DD:HH:MM:SS). Adds a volt::Timer checking after every batch, unless one was given; the
  /// time is saved in checkpoints, so a resumed fit counts what was spent. min_steps and min_epochs still
  /// hold. nullopt: no limit.
  std::optional<Duration> max_time{};
  /// Batches whose gradients are summed before each optimizer step (the loss is divided by it); >= 1. The
  /// last, incomplete window of an epoch still steps.
  std::int64_t accumulate_grad_batches = 1;
  /// Clip gradients to this norm or value after unscaling, before the optimizer step; nullopt or 0: off.
  std::optional<double> gradient_clip_val{};
  /// How gradient_clip_val clips (see GradClipAlgorithm).
  GradClipAlgorithm gradient_clip_algorithm = GradClipAlgorithm::norm;
  /// Validate every fraction of an epoch (double) or every N training batches (int).
  BatchAmount val_check_interval = 1.0;
  /// Validate every N epochs; nullopt: only by val_check_interval's batch count.
  std::optional<std::int64_t> check_val_every_n_epoch = 1;
  /// Training batches per epoch: a fraction of the epoch or a count. A fraction other
  /// than 1.0 needs data whose size is known (volt::sized), else fit() throws MisconfigurationError.
  BatchAmount limit_train_batches = 1.0;
  /// Validation batches per validation run (0 disables validation), as limit_train_batches.
  BatchAmount limit_val_batches = 1.0;
  /// Batches trainer.test() runs, as limit_train_batches.
  BatchAmount limit_test_batches = 1.0;
  /// Batches trainer.predict() runs, as limit_train_batches.
  BatchAmount limit_predict_batches = 1.0;
  /// Lightning's overfit_batches: train and validate on the same few batches every epoch (a fraction of the
  /// epoch or a count; 0: off). It replaces limit_train_batches and limit_val_batches (fast_dev_run does not
  /// shorten them), and a loader that shuffles (RandomSampler) yields the same batches each epoch, with
  /// Lightning's warning. See docs/data-modules.md.
  BatchAmount overfit_batches = 0.0;
  /// Lightning's reload_dataloaders_every_n_epochs: data given as a loader factory (a callable returning a
  /// loader, or a volt::DataModule's *_dataloader functions) is requested again every N epochs (the training
  /// loader at the start of the epoch, the validation loader at the next validation); 0: once per fit.
  std::int64_t reload_dataloaders_every_n_epochs = 0;
  /// Validation batches run before training to catch bugs early; -1: all.
  std::int64_t num_sanity_val_steps = 2;
  /// Logged metrics are written every N optimizer steps; 0 disables step logging.
  std::int64_t log_every_n_steps = 50;
  /// Run N batches of train/val/test (0: off; 1 is Lightning's `fast_dev_run=True`), no logging or checkpoints.
  std::int64_t fast_dev_run = 0;
  /// Run fit under LibTorch's autograd anomaly detection (Lightning's detect_anomaly): a backward pass that
  /// produces NaN throws c10::Error naming the operation ("Function 'SqrtBackward0' returned nan values in its
  /// 0th output."), with the forward operation's trace. Slow; for debugging.
  bool detect_anomaly = false;
  /// LibTorch's deterministic algorithms: true, false or "warn" (see volt::Deterministic: true and "warn" also
  /// turn cuDNN's benchmark off unless `benchmark` is given, and set CUBLAS_WORKSPACE_CONFIG); unset leaves
  /// LibTorch's setting alone. Set when the Trainer is constructed and not restored, as in Lightning.
  Deterministic deterministic{};
  /// cuDNN's benchmark mode (torch.backends.cudnn.benchmark: try the convolution algorithms for each new input
  /// shape and keep the fastest); nullopt leaves LibTorch's setting alone (off unless changed), except that
  /// `deterministic` turns it off. Only CUDA convolutions use it.
  std::optional<bool> benchmark{};
  /// torch.set_float32_matmul_precision: "highest", "high" (TF32 tensor cores on CUDA GPUs that have them) or
  /// "medium"; unset leaves LibTorch's setting alone ("highest" unless changed). Set when the Trainer is
  /// constructed and not restored. On a CUDA GPU with tensor cores, fit() prints Lightning's hint when float32
  /// matmuls run at "highest". See volt::Float32MatmulPrecision.
  Float32MatmulPrecision float32_matmul_precision{};
  /// The layout of the model's 4-D parameters and buffers and of every 4-D floating tensor of each batch:
  /// contiguous (NCHW, nothing converted), channels_last (NHWC: the layout of cuDNN's fastest convolution
  /// kernels), or automatic (channels_last on CUDA when the model has a 2-D convolution). Checkpoints hold the
  /// weights contiguous. See volt::MemoryFormat and docs/math-modes.md.
  MemoryFormat memory_format = MemoryFormat::contiguous;
  /// Seeds LibTorch's generators (CPU and CUDA) at construction when set (Lightning's seed_everything).
  std::optional<std::uint64_t> seed{};
  /// Root of logs and checkpoints; empty: the current directory.
  std::string default_root_dir{};
  /// Add the default volt::ProgressBar callback when none is given. false with a ProgressBar among the
  /// callbacks is a MisconfigurationError.
  bool enable_progress_bar = true;
  /// Add a default volt::ModelCheckpoint{} when none is given. false with a ModelCheckpoint among the
  /// callbacks is a MisconfigurationError.
  bool enable_checkpointing = true;
  /// Add the default volt::ModelSummary callback when none is given.
  bool enable_model_summary = true;
  /// Write metrics with the default CSVLogger (Lightning's `logger=True`); false: no logger.
  bool logger = true;
  /// Evaluate under torch::InferenceMode (true) or torch::NoGradGuard (false).
  bool inference_mode = true;
  /// Stop fit() with std::runtime_error naming the step and batch when a training loss is NaN or infinite.
  /// (Under FP16Autocast an overflowing *gradient* is not an error: the grad scaler skips the step and
  /// fit() logs it.)
  bool error_on_nonfinite_loss = false;
  /// What a failed checkpoint write does during fit() (see CheckpointFailure).
  CheckpointFailure on_checkpoint_failure = CheckpointFailure::raise;
  /// SIGINT and SIGTERM during fit() finish the current batch, save `interrupted.ckpt` (when checkpointing
  /// is on), run teardown and return from fit() with trainer.interrupted() true. false: signals keep their
  /// previous handlers.
  bool handle_signals = true;
  /// Capture the whole training step (forward, backward, grad scaler, gradient clipping, optimizer step) in
  /// one CUDA graph after cuda_graph_warmup_steps eager steps, and replay it for every batch of the same
  /// shapes (a batch of other shapes, such as a short last batch, runs eagerly). Removes the launch cost of
  /// small models. Needs the CUDA accelerator with one device, accumulate_grad_batches 1, torch::optim::Adam,
  /// AdamW or SGD, and no callback or model hook between training_step and the optimizer step; otherwise
  /// fit() says which of these is missing and trains eagerly. See docs/cuda-graphs.md.
  bool cuda_graphs = false;
  /// Eager optimizer steps before the capture (cuDNN's algorithm choice and lazy initialisation happen
  /// there); >= 1.
  std::int64_t cuda_graph_warmup_steps = 3;
  /// Time the Trainer's actions and hooks (see ProfilerChoice and docs/profiling.md); empty: no profiler.
  ProfilerChoice profiler{};
};

namespace detail {

VOLT_INLINE void validate(const TrainerOptions& options);

}  // namespace detail
}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/trainer/impl/options.ipp>
#endif

/// \file
/// volt::Fabric: Lightning Fabric for LibTorch, for programs that write their own training loop.
///
/// The user writes the loop; Fabric places the model, the optimizer state and the batches on the device,
/// applies the precision policy (autocast, loss scaling), clips gradients, saves and loads checkpoints, and
/// offers the strategy's collectives.
///
/// ```
/// volt::Fabric<volt::CUDA, volt::SingleDevice, volt::FP16Autocast> fabric({.devices = 1, .seed = 42});
/// auto [model, optimizer] = fabric.setup(model, optimizer);
/// for (auto batch : fabric.setup_dataloaders(loader)) {
///   optimizer->zero_grad();
///   torch::Tensor loss;
///   {
///     auto autocast = fabric.autocast();
///     loss = torch::mse_loss(model->forward(batch.data), batch.target);
///   }
///   fabric.backward(loss);
///   fabric.clip_gradients(model, *optimizer, {.max_norm = 1.0});   // optional
///   fabric.step(*optimizer);
/// }
/// ```
///
/// Errors are std::invalid_argument where Lightning Fabric raises ValueError (or TypeError) and
/// std::runtime_error where it raises RuntimeError.
#pragma once

#include <volt/accelerators.hpp>
#include <volt/core/log.hpp>
#include <volt/distributed/ddp_runtime.hpp>
#include <volt/fabric/checkpoint.hpp>
#include <volt/fabric/collectives.hpp>
#include <volt/fabric/data_loader.hpp>
#include <volt/fabric/module.hpp>
#include <volt/fabric/options.hpp>
#include <volt/fabric/state.hpp>
#include <volt/precision.hpp>
#include <volt/strategies.hpp>
#include <volt/transfer.hpp>

#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace volt {

/// Options of Fabric::clip_gradients: exactly one of max_norm (clip by the total norm) and clip_val (clip
/// each gradient element to [-clip_val, clip_val]).
struct ClipGradientsOptions {
  /// Scale all gradients together so that their total norm is at most this.
  std::optional<double> max_norm{};
  /// Clamp each gradient element to [-clip_val, clip_val].
  std::optional<double> clip_val{};
  /// The p of the p-norm for max_norm (2.0: Euclidean; infinity: max-norm).
  double norm_type = 2.0;
  /// max_norm: throw when the total norm is inf/NaN (Lightning Fabric's default, True).
  bool error_if_nonfinite = true;
};

/// Lightning Fabric (see the file comment): device placement, precision, gradient clipping, checkpoints
/// and collectives for a training loop the user writes. `Accelerator`, `Strategy` (SingleDevice or DDP) and
/// `Precision` are the Trainer's policy types; unsupported combinations fail to compile. Under DDP every
/// process constructs its own Fabric and calls the same methods in the same order; the members that
/// communicate are collectives and throw DistributedError when a peer fails or times out. Not thread-safe.
template <AcceleratorChoice Accelerator = Auto, StrategyPolicy Strategy = SingleDevice, PrecisionPolicy Precision = FP32>
class Fabric {
  static_assert((check_strategy_supported<Accelerator, Strategy>(), true));
  static_assert((check_precision_supported<Accelerator, Precision>(), true));
  static_assert(strategy_implemented_v<Strategy>,
                "volt: Fabric runs volt::SingleDevice and volt::DDP; this strategy has no implementation "
                "(volt::strategy_implemented_v<Strategy> is false)");

 public:
  /// The Accelerator policy this Fabric was instantiated with.
  using accelerator_type = Accelerator;
  /// The Strategy policy.
  using strategy_type = Strategy;
  /// The Precision policy.
  using precision_type = Precision;

  /// Validates the options, sets the math modes, selects the devices (the Trainer's connector, Fabric's error
  /// types), sets up the strategy's environment and the precision on the root device, and seeds when asked.
  /// Prints no device lines (Lightning Fabric does not). `precision` configures the policy (e.g.
  /// FP16Autocast({.init_scale = 1024})).
  /// Throws std::invalid_argument for invalid options or device specs (no device, num_nodes < 1, more than
  /// one device with SingleDevice), std::runtime_error for an unavailable accelerator, and what the
  /// precision's setup throws. Under DDP the constructor is where the processes start and meet: local rank 0
  /// of a volt-launched run starts the other local ranks, and every rank joins the process group
  /// (MisconfigurationError for LOCAL_RANK without MASTER_PORT, DistributedError when peers do not join).
  explicit Fabric(FabricOptions options = {}, Precision precision = {})
      : options_(std::move(options)), precision_(std::move(precision)) {
    detail::validate(options_);
    detail::set_math_modes(options_.float32_matmul_precision, options_.benchmark, options_.deterministic);
    selection_ = detail::select_strategy_devices<Accelerator, Strategy>(options_.devices, options_.num_nodes,
                                                                         Frontend::fabric);
    strategy_.configure(selection_, options_.num_nodes);
    strategy_.setup_environment();
    root_device_ = strategy_.root_device();
    visit_accelerator(selection_.accelerator, [&](auto accelerator) {
      decltype(accelerator)::setup_device(root_device_, Frontend::fabric);
    });
    precision_.setup(root_device_);
    if (options_.seed) seed_everything(*options_.seed);
  }

  // ---- placement ---------------------------------------------------------------------------------

  /// The device this process computes on (Lightning's fabric.device).
  torch::Device device() const { return root_device_; }
  /// Lightning's device ids of the selected devices.
  const std::vector<int>& device_ids() const { return selection_.device_ids; }
  /// The accelerator in use (Auto resolved at construction).
  AcceleratorKind accelerator() const { return selection_.accelerator; }
  /// The precision policy object (e.g. to read the GradScaler of FP16Autocast).
  Precision& precision() { return precision_; }
  /// The options given at construction.
  const FabricOptions& options() const { return options_; }

  /// Seeds LibTorch's CPU and CUDA generators (Lightning's seed_everything) and logs "Seed set to <seed>"
  /// on rank zero.
  void seed_everything(std::uint64_t seed) {
    torch::manual_seed(seed);
    log::info_rank_zero("Seed set to " + std::to_string(seed));
  }

  /// Prepares `model` and `optimizer` for training and returns them (the same objects, for
  /// `auto [model, opt] = fabric.setup(model, opt);`): the precision converts the module (FP64, FP16True,
  /// BF16True cast it), the module moves to device(), the strategy wraps it, and the optimizer's existing
  /// state moves to device(). Run-time rank: every rank (under DDP a collective: every rank starts from
  /// rank 0's parameters and buffers, and the gradient reducer is attached). The optimizer must hold the
  /// model's parameters (the move keeps their identity). Throws std::invalid_argument when the model or
  /// the optimizer was already set up ("A model should be passed only once to the `setup` method.", "An
  /// optimizer should be passed only once to the `setup` method.") or a pointer is empty.
  template <class Model, class Optimizer>
  std::pair<Model, Optimizer> setup(Model model, Optimizer optimizer) {
    static_assert(detail::fabric_optimizer_shared_ptr<Optimizer>,
                  "volt::Fabric::setup(model, optimizer): pass the optimizer as a std::shared_ptr (e.g. "
                  "std::make_shared<torch::optim::Adam>(model->parameters(), ...))");
    if (!optimizer) throw std::invalid_argument("volt::Fabric::setup: the optimizer pointer is empty");
    if (set_up_optimizers_.count(optimizer.get()) != 0) {
      throw std::invalid_argument("An optimizer should be passed only once to the `setup` method.");
    }
    setup_module(model);
    detail::optimizer_state_to_device(*optimizer, root_device_);
    set_up_optimizers_.insert(optimizer.get());
    return {std::move(model), std::move(optimizer)};
  }

  /// Prepares a model without an optimizer (Lightning's setup_module): convert, move, wrap. Returns it.
  /// Every rank, a collective under DDP (as setup()). Throws std::invalid_argument when it was already set
  /// up or the model pointer is empty.
  template <class Model>
  Model setup_module(Model model) {
    torch::nn::Module& module = detail::fabric_module(model);
    if (set_up_modules_.count(&module) != 0) {
      throw std::invalid_argument("A model should be passed only once to the `setup` method.");
    }
    precision_.convert_module(module);
    module.to(root_device_);
    if (detail::uses_channels_last(options_.memory_format, root_device_, module)) {
      *channels_last_ = true;
      detail::module_to_channels_last(module);
    }
    strategy_.setup_module(module);
    set_up_modules_.insert(&module);
    return model;
  }

  /// A view of `data` (a range of batches, or a pointer to one such as torch::data's loaders) whose batches
  /// arrive on device() (Lightning's setup_dataloaders with move_to_device=True). `data` must outlive it.
  template <class Data>
  DeviceDataLoader<Data> setup_dataloaders(Data& data) const {
    return DeviceDataLoader<Data>(data, root_device_, channels_last_);
  }

  /// `batch` (any collection volt::batch_to_device understands) with its tensors on device() (4-D floating ones
  /// in channels-last strides when memory_format says so).
  template <class Batch>
  std::remove_cvref_t<Batch> to_device(Batch&& batch) const {
    if (*channels_last_) return detail::batch_to_channels_last(batch_to_device(std::forward<Batch>(batch), root_device_));
    return batch_to_device(std::forward<Batch>(batch), root_device_);
  }

  /// An RAII guard for the forward pass under the precision: autocast for FP16Autocast/BF16Autocast, the
  /// default dtype for FP64/FP16True/BF16True, nothing for FP32. Destroy it on the thread that made it,
  /// before backward().
  [[nodiscard]] auto autocast() const { return precision_.forward_context(); }

  /// `batch` with floating tensors cast for the precision (FP64/FP16True/BF16True), else unchanged.
  template <class Batch>
  std::remove_cvref_t<Batch> convert_input(Batch&& batch) {
    return precision_.convert_input(std::forward<Batch>(batch));
  }

  // ---- the step ----------------------------------------------------------------------------------

  /// Backpropagates `loss` through the precision: scaled by the GradScaler under FP16Autocast, as is
  /// otherwise (Lightning's fabric.backward). Under DDP it is a collective (the gradients are averaged
  /// across ranks before it returns) unless inside no_backward_sync(). Throws std::invalid_argument for an
  /// undefined loss, DistributedError when the gradient all-reduce fails, and what LibTorch's backward throws.
  void backward(const torch::Tensor& loss) {
    if (!loss.defined()) throw std::invalid_argument("volt::Fabric::backward: the loss tensor is undefined");
    strategy_.prepare_for_backward(/*sync=*/!no_backward_sync_);
    precision_.pre_backward(loss).backward();
    if (!no_backward_sync_) strategy_.finish_gradient_sync();
  }

  /// Clips the gradients of `model`'s parameters, unscaling `optimizer`'s gradients first under a
  /// GradScaler (as Lightning Fabric does, so clipping sees true gradients; step() then does not unscale
  /// again). Returns the total norm before clipping for max_norm (read on the host), nullopt for clip_val.
  /// Throws std::invalid_argument when both or neither of max_norm and clip_val are set (Lightning's
  /// messages); std::runtime_error when error_if_nonfinite and the total norm is inf/NaN (LibTorch's message).
  /// Local to this rank (under DDP the gradients are already averaged, so every rank clips alike).
  template <class Model>
  std::optional<double> clip_gradients(const Model& model, torch::optim::Optimizer& optimizer, ClipGradientsOptions options) {
    if (options.max_norm && options.clip_val) {
      throw std::invalid_argument(
          "Only one of `clip_val` or `max_norm` can be set as this specifies the underlying clipping algorithm!");
    }
    if (!options.max_norm && !options.clip_val) {
      throw std::invalid_argument("You have to specify either `clip_val` or `max_norm` to do gradient clipping!");
    }
    unscale_gradients(optimizer);
    auto parameters = detail::fabric_module(model).parameters();
    if (options.clip_val) {
      torch::nn::utils::clip_grad_value_(parameters, *options.clip_val);
      return std::nullopt;
    }
    try {
      return torch::nn::utils::clip_grad_norm_(parameters, *options.max_norm, options.norm_type,
                                               options.error_if_nonfinite);
    } catch (const c10::Error& error) {
      throw std::runtime_error(error.what_without_backtrace());
    }
  }

  /// Steps `optimizer` through the precision: under a GradScaler, unscale (unless clip_gradients did),
  /// skip the step when a gradient is inf/NaN, update the scale; otherwise optimizer.step(). Returns whether
  /// the optimizer stepped. Throws std::invalid_argument for LBFGS under mixed precision ("AMP and the
  /// LBFGS optimizer are not compatible."), and what the GradScaler and the optimizer throw. Local to this
  /// rank: no collective.
  bool step(torch::optim::Optimizer& optimizer) {
    if constexpr (Precision::is_autocast) {
      if (dynamic_cast<torch::optim::LBFGS*>(&optimizer) != nullptr) {
        throw std::invalid_argument("AMP and the LBFGS optimizer are not compatible.");
      }
    }
    if (GradScaler* scaler = precision_.scaler()) {
      const bool stepped = scaler->step(optimizer);
      scaler->update();
      return stepped;
    }
    return precision_.optimizer_step(optimizer, [] {});
  }

  // ---- checkpoints -------------------------------------------------------------------------------

  /// Writes `state` to `path` (Lightning's fabric.save): each entry under its name, plus the GradScaler's
  /// state under "volt.precision" when the precision has one. Atomic (written next to `path`, flushed, then
  /// renamed: a crash never leaves a torn file). Only global rank zero writes. Throws volt::CheckpointError
  /// (a std::runtime_error) naming the file. Under DDP every rank must call it: the ranks then agree on
  /// whether the write succeeded (a collective, in place of Lightning's barrier; the strategy's
  /// run_and_agree), so when it fails every rank throws: rank zero its own error, the others a
  /// CheckpointError carrying rank zero's message, and no rank is left waiting.
  void save(const std::filesystem::path& path, const FabricState& state) {
    strategy_.run_and_agree(
        [&] {
          if (is_global_zero()) detail::write_fabric_checkpoint(path, state, precision_.scaler());
        },
        [&](const std::string& failure) {
          return CheckpointError("volt: rank 0 could not write the checkpoint " + path.string() + ": " + failure);
        });
  }

  /// Restores every entry of `state` from `path` in place (modules and optimizers keep their identity),
  /// with the file's tensors mapped to device(), and the GradScaler's state when the file has it.
  /// Returns the names in the file that `state` did not ask for (Lightning's returned remainder).
  /// Throws volt::CheckpointError naming the file when it is missing or unreadable; std::runtime_error
  /// with Lightning's message when `strict` and the file lacks a requested key ("The requested state
  /// contains a key 'x' that does not exist in the loaded checkpoint. To disable strict loading, set
  /// `strict=False`."); volt::CheckpointError naming the entry when an entry does not match.
  /// Under DDP every rank reads `path` itself (it must be readable on every node) and then waits at a
  /// barrier, so every rank must call it.
  std::vector<std::string> load(const std::filesystem::path& path, const FabricState& state, bool strict = true) {
    auto remainder = detail::read_fabric_checkpoint(path, state, strict, root_device_, precision_.scaler());
    if (*channels_last_) {
      for (auto* module : set_up_modules_) detail::module_to_channels_last(*const_cast<torch::nn::Module*>(module));
    }
    barrier("fabric.load");
    return remainder;
  }

  // ---- the strategy's collectives (identities for SingleDevice) ----------------------------------

  /// The number of processes of the run: devices x num_nodes with DDP, 1 with SingleDevice.
  int world_size() const { return strategy_.world_size(); }
  /// This process's rank among all processes (0 with SingleDevice).
  int global_rank() const { return strategy_.global_rank(); }
  /// This process's rank on its node.
  int local_rank() const { return strategy_.local_rank(); }
  /// The index of this process's node.
  int node_rank() const { return strategy_.node_rank(); }
  /// Whether this process is global rank 0.
  bool is_global_zero() const { return strategy_.is_global_zero(); }

  /// Waits until every process reaches this call (no-op with one process). A collective; `name` is
  /// Lightning's label for it and does not change what it does.
  void barrier(const std::string& /*name*/ = "") { strategy_.barrier(); }

  /// Reduces `tensor` over processes with `op` ("mean", "sum", "max", "min", "product"; Lightning's
  /// spelling, "avg" is "mean") and returns the result; with one process, `tensor` itself (moved to device()
  /// as Lightning converts inputs). Throws std::invalid_argument for another op. A collective under DDP.
  torch::Tensor all_reduce(const torch::Tensor& tensor, const std::string& op = "mean") {
    const ReduceOp reduce = detail::fabric_reduce_op(op);
    return detail::fabric_all_reduce<Strategy>(strategy_, tensor.to(root_device_), reduce);
  }
  /// Gathers `tensor` from every process (a leading dimension of world_size() with several processes);
  /// with one process, `tensor` on device(), shape unchanged (as Lightning's single-device strategy).
  /// A collective under DDP.
  torch::Tensor all_gather(const torch::Tensor& tensor) {
    return detail::fabric_all_gather<Strategy>(strategy_, tensor.to(root_device_));
  }
  /// `value` as held by process `src` (with one process, `value`). A collective under DDP, for tensors
  /// (same shape and dtype on every rank), arithmetic values (sent as a float64, so integers beyond 2^53
  /// lose precision) and std::string; other types do not compile.
  template <class T>
  T broadcast(T value, int src = 0) {
    return detail::fabric_broadcast<Strategy>(strategy_, std::move(value), src);
  }

  /// A guard under which backward() does not synchronise gradients across processes (for gradient
  /// accumulation; Lightning's fabric.no_backward_sync), for every module of this Fabric, not only `model`;
  /// its destructor restores the previous setting (guards nest). A no-op guard with one process or when
  /// `enabled` is false. Throws std::invalid_argument when `model` was not set up by this Fabric.
  template <class Model>
  [[nodiscard]] auto no_backward_sync(const Model& model, bool enabled = true) {
    torch::nn::Module& module = detail::fabric_module(model);
    if (set_up_modules_.count(&module) == 0) {
      throw std::invalid_argument(
          "You need to set up the model first before you can call `fabric.no_backward_sync()`: "
          "`model = fabric.setup(model, ...)`");
    }
    return detail::NoBackwardSyncGuard(&no_backward_sync_, enabled);
  }

  /// The key under which save() stores the GradScaler's state.
  static constexpr std::string_view precision_state_key = detail::fabric_precision_state_key;

 private:
  void unscale_gradients(torch::optim::Optimizer& optimizer) {
    if (GradScaler* scaler = precision_.scaler()) {
      if (scaler->stage(optimizer) == GradScaler::Stage::ready) scaler->unscale_(optimizer);
    }
  }

  FabricOptions options_;
  Precision precision_;
  detail::StrategyRuntime<Strategy> strategy_;
  bool no_backward_sync_ = false;  ///< inside no_backward_sync(): backward() leaves the gradients local
  DeviceSelection selection_;
  torch::Device root_device_{torch::kCPU};
  /// Whether batches go channels-last (memory_format; shared with the data loaders made before a model).
  std::shared_ptr<bool> channels_last_ = std::make_shared<bool>(false);
  std::set<const torch::nn::Module*> set_up_modules_;
  std::set<const torch::optim::Optimizer*> set_up_optimizers_;
};

}  // namespace volt

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
#include <volt/fabric/data_loader.hpp>
#include <volt/fabric/options.hpp>
#include <volt/fabric/state.hpp>
#include <volt/fabric/strategy_services.hpp>
#include <volt/precision.hpp>
#include <volt/strategies.hpp>
#include <volt/serialization/checkpoint_io.hpp>
#include <volt/transfer.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
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

namespace detail {

template <class T>
concept fabric_module_shared_ptr = requires(const T& pointer) {
  typename T::element_type;
  requires std::derived_from<typename T::element_type, torch::nn::Module>;
  { pointer.get() };
};
template <class T>
concept fabric_module_holder = requires(const T& holder) {
  { holder.ptr() } -> std::convertible_to<std::shared_ptr<torch::nn::Module>>;
};
template <class T>
concept fabric_optimizer_shared_ptr = requires {
  typename T::element_type;
  requires std::derived_from<typename T::element_type, torch::optim::Optimizer>;
};

template <class Model>
torch::nn::Module& fabric_module(const Model& model) {
  if constexpr (std::derived_from<Model, torch::nn::Module>) {
    return const_cast<Model&>(model);
  } else if constexpr (fabric_module_holder<Model>) {
    if (model.is_empty()) throw std::invalid_argument("volt::Fabric: the model holder is empty");
    return *model.ptr();
  } else {
    static_assert(fabric_module_shared_ptr<Model>,
                  "volt::Fabric: the model must be a torch::nn::Module, a std::shared_ptr to one, or a ModuleHolder "
                  "(a TORCH_MODULE type such as torch::nn::Linear)");
    if (!model) throw std::invalid_argument("volt::Fabric: the model pointer is empty");
    return *model;
  }
}

/// Moves an optimizer's state tensors (Adam's moments, SGD's momentum, ...) to `device` by a round trip
/// through LibTorch's serialization, which maps every tensor to the device while loading. No-op when the
/// optimizer has no state yet.
inline void optimizer_state_to_device(torch::optim::Optimizer& optimizer, torch::Device device) {
  if (optimizer.state().empty()) return;
  torch::serialize::OutputArchive out;
  optimizer.save(out);
  std::ostringstream bytes;
  out.save_to(bytes);
  std::istringstream in_bytes(bytes.str());
  torch::serialize::InputArchive in;
  in.load_from(in_bytes, device);
  optimizer.load(in);
}

}  // namespace detail

/// Lightning Fabric (see the file comment): device placement, precision, gradient clipping, checkpoints
/// and collectives for a training loop the user writes. `Accelerator`, `Strategy` (SingleDevice or DDP) and
/// `Precision` are the Trainer's policy types; unsupported combinations fail to compile. Under DDP every
/// process constructs its own Fabric and calls the same methods in the same order; the members that
/// communicate are collectives and throw DistributedError when a peer fails or times out. Not thread-safe.
template <class Accelerator = Auto, class Strategy = SingleDevice, class Precision = FP32>
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

  /// Validates the options, selects the devices (the Trainer's connector, Fabric's error types), sets up the
  /// strategy's environment and the precision on the root device, and seeds when asked. Prints no device
  /// lines (Lightning Fabric does not). `precision` configures the policy (e.g. FP16Autocast({.init_scale = 1024})).
  /// Throws std::invalid_argument for invalid options or device specs (no device, num_nodes < 1, more than
  /// one device with SingleDevice), std::runtime_error for an unavailable accelerator, and what the
  /// precision's setup throws. Under DDP the constructor is where the processes start and meet: local rank 0
  /// of a volt-launched run starts the other local ranks, and every rank joins the process group
  /// (MisconfigurationError for LOCAL_RANK without MASTER_PORT, DistributedError when peers do not join).
  explicit Fabric(FabricOptions options = {}, Precision precision = {})
      : options_(std::move(options)), precision_(std::move(precision)) {
    detail::validate(options_);
    check_strategy_supported_on_machine<Accelerator, Strategy>();
    // "auto" means every device of the accelerator; a single-device strategy takes the first of them.
    const DeviceSpec devices =
        !detail::is_distributed_strategy<Strategy>() && options_.devices.is_auto() ? DeviceSpec{1} : options_.devices;
    selection_ = select_devices<Accelerator>(devices, Frontend::fabric);
    if constexpr (!detail::is_distributed_strategy<Strategy>()) {
      if (selection_.parallel_devices.size() != 1 || options_.num_nodes != 1) {
        std::string ids;
        for (int id : selection_.device_ids) ids += (ids.empty() ? "" : ", ") + std::to_string(id);
        throw std::invalid_argument(
            "volt::SingleDevice runs on exactly one device of one node, but the options selected " +
            std::to_string(selection_.parallel_devices.size()) + " " + std::string(to_string(selection_.accelerator)) +
            " device(s) [" + ids + "] on num_nodes=" + std::to_string(options_.num_nodes) +
            ". Pass {.devices = 1} (or a single id such as volt::devices({1})) and num_nodes = 1.");
      }
    }
    strategy_.setup_environment(selection_.parallel_devices, options_.num_nodes);
    root_device_ = strategy_.root_device(selection_.parallel_devices);
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
    strategy_.setup_module(module);
    set_up_modules_.insert(&module);
    return model;
  }

  /// A view of `data` (a range of batches, or a pointer to one such as torch::data's loaders) whose batches
  /// arrive on device() (Lightning's setup_dataloaders with move_to_device=True). `data` must outlive it.
  template <class Data>
  DeviceDataLoader<Data> setup_dataloaders(Data& data) const {
    return DeviceDataLoader<Data>(data, root_device_);
  }

  /// `batch` (any collection volt::batch_to_device understands) with its tensors on device().
  template <class Batch>
  std::remove_cvref_t<Batch> to_device(Batch&& batch) const {
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
    if constexpr (requires { strategy_.before_backward(); }) strategy_.before_backward();
    precision_.pre_backward(loss).backward();
    if constexpr (requires { strategy_.after_backward(); }) strategy_.after_backward();
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
  /// (a std::runtime_error) naming the file. Under DDP every rank must call it: rank zero then broadcasts
  /// whether the write succeeded (a collective, in place of Lightning's barrier), so when it fails every
  /// rank throws: rank zero its own error, the others a CheckpointError carrying rank zero's message, and
  /// no rank is left waiting.
  void save(const std::filesystem::path& path, const FabricState& state) {
    std::string failure;  // rank zero's error message; empty when the write succeeded
    std::exception_ptr error;
    if (is_global_zero()) {
      try {
        write_checkpoint(path, state);
      } catch (const std::exception& caught) {
        failure = caught.what();
        if (failure.empty()) failure = "unknown error";
        error = std::current_exception();
      }
    }
    if (world_size() > 1) failure = broadcast(std::move(failure), 0);
    if (error) std::rethrow_exception(error);
    if (!failure.empty()) {
      throw CheckpointError("volt: rank 0 could not write the checkpoint " + path.string() + ": " + failure);
    }
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
    torch::serialize::InputArchive archive;
    detail::load_archive(archive, path, root_device_);
    const std::vector<std::string> keys = archive.keys();
    auto in_file = [&](const std::string& key) { return std::find(keys.begin(), keys.end(), key) != keys.end(); };
    for (const auto& [name, entry] : state) {
      if (!in_file(name)) {
        if (strict) {
          throw std::runtime_error("The requested state contains a key '" + name +
                                   "' that does not exist in the loaded checkpoint. To disable strict loading, set "
                                   "`strict=False`. (file " + path.string() + ")");
        }
        continue;
      }
      torch::serialize::InputArchive part;
      archive.read(name, part);
      try {
        entry.load(part, root_device_);
      } catch (const std::exception& cause) {
        throw CheckpointError("volt: the entry '" + name + "' of " + path.string() +
                              " does not match the object passed to load(): " + cause.what());
      }
    }
    if (GradScaler* scaler = precision_.scaler(); scaler != nullptr && in_file(std::string(precision_state_key))) {
      torch::serialize::InputArchive part;
      archive.read(std::string(precision_state_key), part);
      scaler->load(part);
    }
    std::vector<std::string> remainder;
    for (const auto& key : keys) {
      if (state.count(key) == 0 && key != precision_state_key) remainder.push_back(key);
    }
    barrier("fabric.load");
    return remainder;
  }

  // ---- strategy services (identities for SingleDevice) -------------------------------------------

  /// The number of processes of the run: devices x num_nodes with DDP, 1 with SingleDevice.
  int world_size() const { return strategy_.world_size(); }
  /// This process's rank among all processes (0 with SingleDevice).
  int global_rank() const { return strategy_.global_rank(); }
  /// This process's rank on its node.
  int local_rank() const { return strategy_.local_rank(); }
  /// The index of this process's node.
  int node_rank() const { return strategy_.node_rank(); }
  /// Whether this process is global rank 0.
  bool is_global_zero() const { return global_rank() == 0; }

  /// Waits until every process reaches this call (no-op with one process). A collective; `name` is
  /// Lightning's label for it and does not change what it does.
  void barrier(const std::string& name = "") { strategy_.barrier(name); }

  /// Reduces `tensor` over processes with `op` ("mean", "sum", "max", "min", "product"; Lightning's
  /// spelling, "avg" is "mean") and returns the result; with one process, `tensor` itself (moved to device()
  /// as Lightning converts inputs). Throws std::invalid_argument for another op. A collective under DDP.
  torch::Tensor all_reduce(const torch::Tensor& tensor, const std::string& op = "mean") {
    static const std::set<std::string> ops = {"mean", "avg", "sum", "max", "min", "product"};
    if (ops.count(op) == 0) {
      throw std::invalid_argument("volt::Fabric::all_reduce: unsupported reduce op '" + op +
                                  "'; use \"mean\", \"sum\", \"max\", \"min\" or \"product\"");
    }
    return strategy_.all_reduce(tensor.to(root_device_), op);
  }
  /// Gathers `tensor` from every process (a leading dimension of world_size() with several processes);
  /// with one process, `tensor` on device(), shape unchanged (as Lightning's single-device strategy).
  /// A collective under DDP.
  torch::Tensor all_gather(const torch::Tensor& tensor) { return strategy_.all_gather(tensor.to(root_device_)); }
  /// `value` as held by process `src` (with one process, `value`). A collective under DDP, for tensors,
  /// arithmetic values and std::string (see fabric_strategy_services<DDP>::broadcast).
  template <class T>
  T broadcast(T value, int src = 0) {
    return strategy_.broadcast(std::move(value), src);
  }

  /// A guard under which backward() does not synchronise gradients across processes (for gradient
  /// accumulation; Lightning's fabric.no_backward_sync). A no-op guard with one process or when
  /// `enabled` is false. Throws std::invalid_argument when `model` was not set up by this Fabric.
  template <class Model>
  [[nodiscard]] auto no_backward_sync(const Model& model, bool enabled = true) {
    torch::nn::Module& module = detail::fabric_module(model);
    if (set_up_modules_.count(&module) == 0) {
      throw std::invalid_argument(
          "You need to set up the model first before you can call `fabric.no_backward_sync()`: "
          "`model = fabric.setup(model, ...)`");
    }
    return strategy_.no_backward_sync(module, enabled);
  }

  /// The key under which save() stores the GradScaler's state.
  static constexpr std::string_view precision_state_key = "volt.precision";

 private:
  /// save()'s write on rank zero: every entry, then the GradScaler's state, written atomically.
  void write_checkpoint(const std::filesystem::path& path, const FabricState& state) {
    torch::serialize::OutputArchive archive;
    for (const auto& [name, entry] : state) {
      torch::serialize::OutputArchive part;
      entry.save(part);
      archive.write(name, part);
    }
    if (const GradScaler* scaler = precision_.scaler()) {
      torch::serialize::OutputArchive part;
      scaler->save(part);
      archive.write(std::string(precision_state_key), part);
    }
    detail::save_archive_atomically(archive, path);
  }

  void unscale_gradients(torch::optim::Optimizer& optimizer) {
    if (GradScaler* scaler = precision_.scaler()) {
      if (scaler->stage(optimizer) == GradScaler::Stage::ready) scaler->unscale_(optimizer);
    }
  }

  FabricOptions options_;
  Precision precision_;
  [[no_unique_address]] fabric_strategy_services<Strategy> strategy_;
  DeviceSelection selection_;
  torch::Device root_device_{torch::kCPU};
  std::set<const torch::nn::Module*> set_up_modules_;
  std::set<const torch::optim::Optimizer*> set_up_optimizers_;
};

}  // namespace volt

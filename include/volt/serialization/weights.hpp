/// \file
/// volt::save_weights / volt::load_weights: a plain state_dict (name -> tensor) exchanged with Python.
///
/// ```
/// volt::save_weights(model, "model.pt");          // Python: sd = torch.load("model.pt")  (weights_only too)
/// volt::load_weights(model, "from_python.pt");    // Python: torch.save(model.state_dict(), "from_python.pt")
/// ```
///
/// The file is what torch.save writes: a zip archive (LibTorch's PyTorchStreamWriter) holding data.pkl, a
/// protocol-2 pickle of a collections.OrderedDict whose values are tensors rebuilt by
/// torch._utils._rebuild_tensor_v2, the storages as records `data/<n>`, and byteorder. Names use Python's
/// dotted style ("net.0.weight", "bn.running_mean"), parameters then buffers of each module in the order of
/// Python's Module.state_dict().
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/files.hpp>
#include <volt/serialization/pickle.hpp>
#include <volt/serialization/detail/torch_save.hpp>
#include <volt/serialization/detail/zip_reader.hpp>

#include <caffe2/serialize/inline_container.h>
#include <torch/torch.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

namespace volt {

/// A state_dict: names in Python's dotted style, in insertion order.
using StateDict = torch::OrderedDict<std::string, torch::Tensor>;

/// What load_weights(module, path, {.strict = false}) could not match (PyTorch's _IncompatibleKeys).
/// Both lists are empty after a strict load, which throws instead.
struct LoadWeightsResult {
  std::vector<std::string> missing_keys;     ///< In the module, not in the file (left unchanged).
  std::vector<std::string> unexpected_keys;  ///< In the file, not in the module (ignored).
};

/// Options of load_weights and load_state_dict (PyTorch's load_state_dict arguments).
struct LoadWeightsOptions {
  /// Every key of the module must be in the file and every key of the file in the module (PyTorch's
  /// load_state_dict(strict=True)). Shapes must match either way.
  bool strict = true;
};

namespace detail {

template <class T>
concept weights_module_pointer = requires(const T& pointer) {
  { *pointer } -> std::convertible_to<const torch::nn::Module&>;
};

VOLT_INLINE const torch::nn::Module& weights_module(const torch::nn::Module& module);
/// A std::shared_ptr to a module or a ModuleHolder (torch::nn::Linear, a TORCH_MODULE type).
template <weights_module_pointer Pointer>
const torch::nn::Module& weights_module(const Pointer& pointer) {
  if constexpr (requires { pointer.is_empty(); }) {
    if (pointer.is_empty()) throw std::invalid_argument("volt: save_weights/load_weights got an empty module holder");
  } else {
    if (!pointer) throw std::invalid_argument("volt: save_weights/load_weights got an empty module pointer");
  }
  return *pointer;
}

/// Python's Module.state_dict() order: each module (pre-order), its parameters then its buffers.
VOLT_INLINE void collect_state(const torch::nn::Module& module, const std::string& prefix, StateDict& out);

VOLT_INLINE std::string python_shape(c10::IntArrayRef sizes);

VOLT_INLINE std::string quoted_list(const std::vector<std::string>& keys);

}  // namespace detail

/// The state_dict of `module` (a torch::nn::Module, a std::shared_ptr to one, or a ModuleHolder such as
/// torch::nn::Linear): its parameters and buffers under Python's dotted names, sharing storage with the
/// module (no copy). Throws std::invalid_argument for an empty pointer.
template <class Module>
StateDict state_dict(const Module& module) {
  StateDict result;
  detail::collect_state(detail::weights_module(module), "", result);
  return result;
}

/// Writes `weights` to `path` as torch.save(OrderedDict) does, readable by Python's torch.load(path) (with
/// weights_only=True as well) and by load_weights. Tensors are saved detached, contiguous and on the CPU
/// (Python loads them on the CPU). Atomic: the file is written next to `path` and renamed over it, so an
/// existing file is never left torn. Throws std::runtime_error naming `path` when the file cannot be
/// written, std::invalid_argument for an undefined tensor or a dtype torch.save has no storage class for.
/// No rank check: under DDP every rank that calls it writes the file, so call it on global rank 0 only.
VOLT_INLINE void save_weights(const StateDict& weights, const std::filesystem::path& path);

/// Writes the state_dict of `module` (see state_dict()) to `path`; see save_weights(StateDict, path).
template <class Module>
  requires(!std::is_same_v<Module, StateDict>)
void save_weights(const Module& module, const std::filesystem::path& path) {
  save_weights(state_dict(module), path);
}

/// Reads a weights file written by torch.save(state_dict) in Python (a dict or OrderedDict of tensors,
/// zip format, the default since torch 1.6) or by save_weights, or the "state_dict" of a checkpoint (volt's,
/// or Lightning's: its other entries are skipped, never rebuilt), with every tensor on `map_location`. The
/// file is read by volt's own zip reader (every CRC-32 checked) and restricted unpickler.
/// Throws std::runtime_error naming `path` when the file is missing, not a zip archive of torch.save, or
/// holds something other than a dict of tensors (e.g. a whole pickled model).
VOLT_INLINE StateDict load_weights(const std::filesystem::path& path, torch::Device map_location = torch::kCPU);

/// Copies `weights` into `module`'s parameters and buffers (on their devices and dtypes), as PyTorch's
/// load_state_dict. Throws std::runtime_error listing every missing key (strict), unexpected key (strict)
/// and shape mismatch, in PyTorch's words ("Error(s) in loading state_dict: Missing key(s) in
/// state_dict: \"fc.bias\". size mismatch for fc.weight: copying a param with shape torch.Size([2, 3])
/// from checkpoint, the shape in current model is torch.Size([3, 3])."); the module is not modified then.
template <class Module>
LoadWeightsResult load_state_dict(const Module& module, const StateDict& weights, LoadWeightsOptions options = {}) {
  auto own = state_dict(module);
  LoadWeightsResult result;
  std::vector<std::string> mismatches;
  for (const auto& item : own) {
    const auto* loaded = weights.find(item.key());
    if (loaded == nullptr) {
      result.missing_keys.push_back(item.key());
    } else if (loaded->sizes() != item.value().sizes()) {
      mismatches.push_back("size mismatch for " + item.key() + ": copying a param with shape " +
                           detail::python_shape(loaded->sizes()) + " from checkpoint, the shape in current model is " +
                           detail::python_shape(item.value().sizes()) + ".");
    }
  }
  for (const auto& item : weights) {
    if (own.find(item.key()) == nullptr) result.unexpected_keys.push_back(item.key());
  }
  std::string errors;
  if (options.strict && !result.unexpected_keys.empty()) {
    errors += "\n\tUnexpected key(s) in state_dict: " + detail::quoted_list(result.unexpected_keys) + ". ";
  }
  if (options.strict && !result.missing_keys.empty()) {
    errors += "\n\tMissing key(s) in state_dict: " + detail::quoted_list(result.missing_keys) + ". ";
  }
  for (const auto& mismatch : mismatches) errors += "\n\t" + mismatch;
  if (!errors.empty()) throw std::runtime_error("Error(s) in loading state_dict:" + errors);
  torch::NoGradGuard no_grad;
  for (auto& item : own) {
    if (const auto* loaded = weights.find(item.key())) item.value().copy_(*loaded);
  }
  return result;
}

/// Reads `path` (see load_weights(path)) and copies it into `module` (see load_state_dict). The file's
/// tensors are read on the CPU and copied to each parameter's device. Errors also name the file.
template <class Module>
  requires(!std::is_convertible_v<Module, std::filesystem::path>)
LoadWeightsResult load_weights(const Module& module, const std::filesystem::path& path, LoadWeightsOptions options = {}) {
  const auto weights = load_weights(path);
  try {
    return load_state_dict(module, weights, options);
  } catch (const std::runtime_error& cause) {
    throw std::runtime_error(std::string(cause.what()) + " (weights file " + path.string() + ")");
  }
}

}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/serialization/impl/weights.ipp>
#endif

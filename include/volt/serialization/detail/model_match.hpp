/// \file
/// volt::CheckpointError, and the comparison of a checkpoint's model entry with a module (keys, shapes,
/// dtypes) that volt's checkpoint loaders run before LibTorch's Module::load.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace volt {

/// A checkpoint file could not be written or read, or does not fit the model. Says which file and why.
class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {

inline std::string shape_text(c10::IntArrayRef sizes) {
  std::string text = "[";
  for (std::size_t i = 0; i < sizes.size(); ++i) text += (i ? ", " : "") + std::to_string(sizes[i]);
  return text + "]";
}

inline void compare_module_keys(torch::serialize::InputArchive& archive, const torch::nn::Module& module,
                                const std::string& prefix, std::vector<std::string>& problems) {
  std::set<std::string> expected;
  const auto check_tensor = [&](const std::string& name, const torch::Tensor& tensor, bool is_buffer) {
    expected.insert(name);
    torch::Tensor stored;
    if (!archive.try_read(name, stored, is_buffer)) {
      problems.push_back("missing key '" + prefix + name + "' (model " + shape_text(tensor.sizes()) + ")");
    } else if (stored.defined() && tensor.defined() && stored.sizes() != tensor.sizes()) {
      problems.push_back("shape mismatch for '" + prefix + name + "': checkpoint " + shape_text(stored.sizes()) +
                         ", model " + shape_text(tensor.sizes()));
    }
  };
  for (const auto& item : module.named_parameters(/*recurse=*/false)) check_tensor(item.key(), item.value(), false);
  for (const auto& item : module.named_buffers(/*recurse=*/false)) check_tensor(item.key(), item.value(), true);
  for (const auto& child : module.named_children()) {
    expected.insert(child.key());
    torch::serialize::InputArchive child_archive;
    if (!archive.try_read(child.key(), child_archive)) {
      problems.push_back("missing submodule '" + prefix + child.key() + "'");
      continue;
    }
    compare_module_keys(child_archive, *child.value(), prefix + child.key() + ".", problems);
  }
  for (const auto& key : archive.keys()) {
    if (!expected.count(key) && key != "training") problems.push_back("unexpected key '" + prefix + key + "' in the checkpoint");
  }
}

/// The first floating parameter or buffer whose dtype in `archive` differs from `module`'s: its dotted name,
/// the checkpoint's dtype and the module's; nullopt when all agree (or a key is missing: check_model_matches
/// reports that).
struct DtypeMismatch {
  std::string name;
  c10::ScalarType stored;
  c10::ScalarType expected;
};
inline std::optional<DtypeMismatch> first_dtype_mismatch(torch::serialize::InputArchive& archive,
                                                         const torch::nn::Module& module,
                                                         const std::string& prefix = "") {
  const auto check = [&](const std::string& name, const torch::Tensor& tensor,
                         bool is_buffer) -> std::optional<DtypeMismatch> {
    torch::Tensor stored;
    if (!tensor.defined() || !tensor.is_floating_point() || !archive.try_read(name, stored, is_buffer)) return {};
    if (!stored.defined() || stored.scalar_type() == tensor.scalar_type()) return {};
    return DtypeMismatch{prefix + name, stored.scalar_type(), tensor.scalar_type()};
  };
  for (const auto& item : module.named_parameters(/*recurse=*/false)) {
    if (auto found = check(item.key(), item.value(), false)) return found;
  }
  for (const auto& item : module.named_buffers(/*recurse=*/false)) {
    if (auto found = check(item.key(), item.value(), true)) return found;
  }
  for (const auto& child : module.named_children()) {
    torch::serialize::InputArchive child_archive;
    if (!archive.try_read(child.key(), child_archive)) continue;
    if (auto found = first_dtype_mismatch(child_archive, *child.value(), prefix + child.key() + ".")) return found;
  }
  return std::nullopt;
}

/// Throws CheckpointError when `model_archive` (the "model" entry of the checkpoint `shown`) does not hold
/// exactly `module`'s parameters, buffers and submodules with the same shapes; the message lists every
/// missing and extra key and every shape mismatch. LibTorch's Module::load would silently accept other shapes.
inline void check_model_matches(torch::serialize::InputArchive& model_archive, const torch::nn::Module& module,
                                const std::string& shown) {
  std::vector<std::string> problems;
  try {
    compare_module_keys(model_archive, module, "", problems);
  } catch (const std::exception& cause) {
    throw CheckpointError("volt: the model in " + shown + " cannot be read: " + cause.what());
  }
  if (problems.empty()) return;
  std::string message = "volt: the checkpoint " + shown + " does not match the model (" +
                        std::to_string(problems.size()) + " problem" + (problems.size() == 1 ? "" : "s") + "): ";
  for (std::size_t i = 0; i < problems.size() && i < 20; ++i) message += (i ? "; " : "") + problems[i];
  if (problems.size() > 20) message += "; ...";
  throw CheckpointError(message);
}

}  // namespace detail
}  // namespace volt

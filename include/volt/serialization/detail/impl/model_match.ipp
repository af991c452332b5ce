/// \file
/// Definitions of the functions declared in volt/serialization/detail/model_match.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE std::string shape_text(c10::IntArrayRef sizes) {
  std::string text = "[";
  for (std::size_t i = 0; i < sizes.size(); ++i) text += (i ? ", " : "") + std::to_string(sizes[i]);
  return text + "]";
}

VOLT_INLINE void compare_module_keys(torch::serialize::InputArchive& archive, const torch::nn::Module& module,
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

VOLT_INLINE std::optional<DtypeMismatch> first_dtype_mismatch(torch::serialize::InputArchive& archive,
                                                              const torch::nn::Module& module,
                                                              const std::string& prefix) {
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

VOLT_INLINE void check_model_matches(torch::serialize::InputArchive& model_archive, const torch::nn::Module& module,
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

}  // namespace volt::detail

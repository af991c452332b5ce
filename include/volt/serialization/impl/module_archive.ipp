/// \file
/// Definitions of the functions declared in volt/serialization/module_archive.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE void save_module_contiguous(const torch::nn::Module& module, torch::serialize::OutputArchive& archive) {
  torch::NoGradGuard no_grad;
  auto contiguous = [](const torch::Tensor& tensor) {
    if (!tensor.defined() || tensor.is_contiguous()) return tensor;
    auto copy = tensor.detach().contiguous();
    copy.set_requires_grad(tensor.requires_grad());
    return copy;
  };
  for (const auto& parameter : module.named_parameters(/*recurse=*/false)) {
    archive.write(parameter.key(), contiguous(parameter.value()));
  }
  for (const auto& buffer : module.named_buffers(/*recurse=*/false)) {
    archive.write(buffer.key(), contiguous(buffer.value()), /*is_buffer=*/true);
  }
  for (const auto& child : module.named_children()) {
    if (!child.value()->is_serializable()) continue;
    torch::serialize::OutputArchive child_archive(archive.compilation_unit());
    save_module_contiguous(*child.value(), child_archive);
    archive.write(child.key(), child_archive);
  }
}

}  // namespace volt::detail

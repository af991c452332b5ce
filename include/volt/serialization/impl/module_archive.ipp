/// \file
/// Definitions of the functions declared in volt/serialization/module_archive.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

// Module::save's walk, with each tensor written as `written(tensor)` returns it.
template <class Written>
void save_module_walk(const torch::nn::Module& module, torch::serialize::OutputArchive& archive, const Written& written) {
  for (const auto& parameter : module.named_parameters(/*recurse=*/false)) {
    archive.write(parameter.key(), written(parameter.value()));
  }
  for (const auto& buffer : module.named_buffers(/*recurse=*/false)) {
    archive.write(buffer.key(), written(buffer.value()), /*is_buffer=*/true);
  }
  for (const auto& child : module.named_children()) {
    if (!child.value()->is_serializable()) continue;
    torch::serialize::OutputArchive child_archive(archive.compilation_unit());
    save_module_walk(*child.value(), child_archive, written);
    archive.write(child.key(), child_archive);
  }
}

// `tensor`, or a contiguous copy of it that keeps requires_grad.
struct ContiguousCopy {
  torch::Tensor operator()(const torch::Tensor& tensor) const {
    if (!tensor.defined() || tensor.is_contiguous()) return tensor;
    auto copy = tensor.detach().contiguous();
    copy.set_requires_grad(tensor.requires_grad());
    return copy;
  }
};

VOLT_INLINE void save_module_contiguous(const torch::nn::Module& module, torch::serialize::OutputArchive& archive) {
  torch::NoGradGuard no_grad;
  save_module_walk(module, archive, ContiguousCopy{});
}

VOLT_INLINE void save_module_replaced(const torch::nn::Module& module, const std::vector<torch::Tensor>& parameters,
                                      const std::vector<torch::Tensor>& buffers,
                                      torch::serialize::OutputArchive& archive, bool contiguous) {
  torch::NoGradGuard no_grad;
  // Matched by tensor identity: the walk meets each module's own tensors, parameters() lists them all.
  std::unordered_map<const c10::TensorImpl*, torch::Tensor> replacement;
  auto match = [&replacement](const std::vector<torch::Tensor>& own, const std::vector<torch::Tensor>& replaced,
                              const char* kind) {
    if (own.size() != replaced.size()) {
      throw std::logic_error("volt: " + std::to_string(replaced.size()) + " " + kind + "s given for a module of " +
                             std::to_string(own.size()));
    }
    for (std::size_t i = 0; i < own.size(); ++i) replacement.emplace(own[i].unsafeGetTensorImpl(), replaced[i]);
  };
  match(module.parameters(), parameters, "parameter");
  match(module.buffers(), buffers, "buffer");
  save_module_walk(module, archive, [&](const torch::Tensor& tensor) {
    const auto found = replacement.find(tensor.unsafeGetTensorImpl());
    const torch::Tensor& written = found == replacement.end() ? tensor : found->second;
    return contiguous ? ContiguousCopy{}(written) : written;
  });
}

}  // namespace volt::detail

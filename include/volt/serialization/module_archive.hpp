/// \file
/// Writing a module into a LibTorch archive with every tensor contiguous (what a checkpoint of a
/// channels-last run holds).
#pragma once

#include <volt/core/linkage.hpp>
#include <torch/torch.h>

#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace volt::detail {

/// Writes `module` into `archive` with the entries and nesting torch::nn::Module::save writes (its own
/// parameters, then its buffers, then one archive per serializable child), each tensor in contiguous strides,
/// so that a model trained in channels-last is saved in the layout users expect and loads the same way.
VOLT_INLINE void save_module_contiguous(const torch::nn::Module& module, torch::serialize::OutputArchive& archive);

/// Writes `module`'s entries and nesting (as Module::save) into `archive` with `parameters` and `buffers` (in the
/// order of module.parameters() and module.buffers()) in place of the module's own tensors, each contiguous when
/// `contiguous`: an averaged copy of the weights saved as the module's. Throws std::logic_error when the numbers
/// of tensors differ from the module's.
VOLT_INLINE void save_module_replaced(const torch::nn::Module& module, const std::vector<torch::Tensor>& parameters,
                                      const std::vector<torch::Tensor>& buffers,
                                      torch::serialize::OutputArchive& archive, bool contiguous);

}  // namespace volt::detail

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/serialization/impl/module_archive.ipp>
#endif

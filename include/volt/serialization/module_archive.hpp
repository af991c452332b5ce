/// \file
/// Writing a module into a LibTorch archive with every tensor contiguous (what a checkpoint of a
/// channels-last run holds).
#pragma once

#include <volt/core/linkage.hpp>
#include <torch/torch.h>

namespace volt::detail {

/// Writes `module` into `archive` with the entries and nesting torch::nn::Module::save writes (its own
/// parameters, then its buffers, then one archive per serializable child), each tensor in contiguous strides,
/// so that a model trained in channels-last is saved in the layout users expect and loads the same way.
VOLT_INLINE void save_module_contiguous(const torch::nn::Module& module, torch::serialize::OutputArchive& archive);

}  // namespace volt::detail

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/serialization/impl/module_archive.ipp>
#endif

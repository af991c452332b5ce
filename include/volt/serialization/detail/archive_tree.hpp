/// \file
/// LibTorch serialize archives (torch::serialize::OutputArchive / InputArchive, in which volt's parts save
/// their state) as trees of detail::pickle values, and back: the bridge between volt's state and the
/// torch.save files its checkpoints are. Implementation of volt/serialization/checkpoint_io.hpp, no public API.
///
/// An archive becomes a Dict in the archive's key order: a nested archive a Dict, a parameter a tensor value
/// marked `parameter`, a buffer or tensor value a tensor, and every other value its Python counterpart (int,
/// float, bool, str, None, list with its LibTorch element type, tuple).
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/serialization/detail/model_match.hpp>
#include <volt/serialization/detail/pickle_reader.hpp>

#include <torch/torch.h>

#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace volt::detail {

/// The tree of `archive` (see the file comment). Throws CheckpointError naming the key of a value a
/// checkpoint file cannot hold (a dict or an object).
VOLT_INLINE pickle::ValuePtr archive_tree(torch::serialize::OutputArchive& archive);

/// The tree of a loaded archive.
VOLT_INLINE pickle::ValuePtr archive_tree(torch::serialize::InputArchive& archive);

/// Loads `tree` (a Dict, as archive_tree makes, perhaps read from an untrusted file) into `archive`, with its
/// tensors on `device`: Dicts become nested archives, tensors parameters (marked) or buffers, lists LibTorch
/// lists of their element type (a list's `element`, else its first item's type; an empty one without either
/// an int list). Every key must be 1 to 4096 printable ASCII characters other than quotes and backslashes,
/// and unique in its Dict; nesting is limited to 64 levels. Throws CheckpointError naming `shown` and the key.
VOLT_INLINE void load_archive_tree(const pickle::Value& tree, torch::serialize::InputArchive& archive,
                                   torch::Device device, const std::string& shown);

/// Writes `tree` (a Dict, see load_archive_tree for what it may hold) into `out`. Throws CheckpointError naming
/// `shown` and the key.
VOLT_INLINE void write_archive_tree(const pickle::Value& tree, torch::serialize::OutputArchive& out,
                                    const std::string& shown);

/// An empty list of a tree: the keys from the root to it, and its LibTorch element type.
struct EmptyListType {
  std::vector<std::string> path;
  std::string element;
};

/// The empty lists of `tree` (through Dicts only) and their element types.
VOLT_INLINE std::vector<EmptyListType> empty_list_types(const pickle::Value& tree);

/// Sets the element type of the empty lists of `tree` named by `types` (paths that lead elsewhere are ignored).
VOLT_INLINE void set_empty_list_types(pickle::Value& tree, const std::vector<EmptyListType>& types);

}  // namespace volt::detail

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/serialization/detail/impl/archive_tree.ipp>
#endif

/// \file
/// The layout of volt's checkpoint files (format 2): the archive tree of a fit (detail/archive_tree.hpp)
/// arranged as Lightning's checkpoint dict, and back. Implementation of volt/serialization/checkpoint_io.hpp,
/// no public API.
///
/// A Trainer checkpoint (a tree with a "volt/format" entry) becomes
///
///     {"epoch": int, "global_step": int, "volt_version": str,
///      "state_dict": OrderedDict(name -> tensor),            # the "model" entry, Python's dotted names
///      "loops": {"epoch", "global_step", "batches_done", "at_epoch_end", "batches_stepped"},
///      "optimizer_states": [{"state": dict, "param_groups": [{"lr": float}, ...]}, ...],
///      "lr_schedulers": [{"steps": int, "state": dict (schedulers with more state than a step count)}, ...],
///      "callbacks": {"<Type>/<n>": dict, ...},
///      "hyper_parameters": {name: str, ...},                  # the "hparams" entry (the model's hparams())
///      "volt": {"format": 2, "layout": "trainer", "weights_only": bool, "precision": str,
///               "model_layout": {"buffers": [name, ...], "empty_modules": [name, ...]},
///               "list_types": [[[key, ...], type], ...], "entries": {...}}}
///
/// ("entries" holds the tree's other entries under their own keys; "list_types" the element types of its
/// empty lists). Any other tree (Fabric's) keeps its keys at the top, each entry that holds only tensors in
/// nested dicts (a module) flattened to a state_dict; "volt" then has "layout": "fabric" and "flat":
/// {key: {"buffers": [...], "empty_modules": [...]}}.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/serialization/detail/archive_tree.hpp>
#include <volt/serialization/detail/model_match.hpp>
#include <volt/serialization/detail/pickle_reader.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace volt::detail {

/// The version of volt written into checkpoints ("volt_version").
inline constexpr const char* checkpoint_volt_version = "0.1.0";

/// The checkpoint format this volt writes (the "format" entry of the "volt" dict).
inline constexpr std::int64_t checkpoint_format = 2;

/// The file's dict for the archive tree `tree` (see the file comment).
VOLT_INLINE pickle::ValuePtr checkpoint_layout(const pickle::Value& tree);

/// Whether `root` (a torch.save file's content) is a volt checkpoint of format 2 or later: a dict with a
/// "volt" dict holding an int "format".
VOLT_INLINE bool is_volt_checkpoint(const pickle::Value& root);

/// The archive tree of the checkpoint dict `root` (the inverse of checkpoint_layout), checking every entry it
/// reads. Throws CheckpointError naming `shown` for a newer format or a malformed entry.
VOLT_INLINE pickle::ValuePtr archive_of_layout(const pickle::Value& root, const std::string& shown);

}  // namespace volt::detail

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/serialization/detail/impl/checkpoint_layout.ipp>
#endif

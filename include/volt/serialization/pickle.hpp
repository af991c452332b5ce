/// \file
/// The subset of Python's pickle format that torch.save uses for a state_dict; implementation, no public API.
///
/// Written and read by hand: an OrderedDict (or dict) from names to tensors rebuilt by
/// torch._utils._rebuild_tensor_v2 from storages kept as records `data/<key>` of the zip archive.
/// Implementation detail of volt/serialization/weights.hpp.
///
/// Written by hand rather than with LibTorch's torch::pickle_save/pickle_load because those tag typed dicts
/// with torch.jit._pickle.restore_type_tag (refused by torch.load(weights_only=True), the default since
/// torch 2.6), and LibTorch 1.13's reader returns None for the OrderedDict with `_metadata` that
/// torch.save(model.state_dict()) writes.
///
/// The writer is in detail/pickle_writer.hpp, the reader in detail/pickle_reader.hpp, the storage class names
/// both use in detail/pickle_storage.hpp.
#pragma once

#include <volt/serialization/detail/pickle_reader.hpp>
#include <volt/serialization/detail/pickle_writer.hpp>

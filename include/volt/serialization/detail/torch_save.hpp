/// \file
/// Files in torch.save's format holding any value of detail::pickle (dicts, lists, numbers, strings,
/// tensors): written with LibTorch's zip writer, read with volt's own zip reader (every entry's CRC-32 checked)
/// and restricted unpickler (detail/pickle_reader.hpp), so no untrusted byte reaches LibTorch's parsers.
/// Implementation of volt/serialization/checkpoint_io.hpp and weights.hpp, no public API.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/serialization/detail/model_match.hpp>
#include <volt/serialization/detail/pickle_reader.hpp>
#include <volt/serialization/detail/pickle_writer.hpp>
#include <volt/serialization/detail/zip_reader.hpp>

#include <caffe2/serialize/inline_container.h>
#include <torch/torch.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace volt::detail {

/// The bytes of the file torch.save(root) writes (protocol 2; the records archive/data.pkl,
/// archive/data/<n>, archive/byteorder and archive/version). Python's torch.load reads it, weights_only too.
VOLT_INLINE std::string torch_save_bytes(const pickle::Value& root);

/// A file read by torch_load_bytes: `root` stays valid while this object lives.
struct TorchLoaded {
  pickle::ValuePtr root;
  /// Owns the values (declared after `root`, so it is destroyed first and frees them without recursion).
  std::unique_ptr<pickle::Reader> reader;
};

/// Whether the zip entries are those of a torch.save file (a `<name>/data.pkl` and no LibTorch archive's
/// `<name>/constants.pkl`).
VOLT_INLINE bool is_torch_save_file(const std::vector<ZipEntry>& entries);

/// Reads the torch.save file whose zip entries are `entries` (of the file `shown`): data.pkl through the
/// restricted unpickler (`lenient`: objects of other classes read as opaque values), each storage copied
/// from its record into a CPU tensor. Throws CheckpointError naming `shown` and what is wrong.
VOLT_INLINE TorchLoaded torch_load_entries(const std::vector<ZipEntry>& entries, const std::string& shown,
                                           bool lenient = false);

}  // namespace volt::detail

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/serialization/detail/impl/torch_save.ipp>
#endif

/// \file
/// volt::save_safetensors / volt::load_safetensors: weights in the safetensors format (Hugging Face's), read
/// and written by Python's `safetensors` package (`safetensors.torch.save_file` / `load_file`).
///
/// ```
/// volt::save_safetensors(model, "model.safetensors", {{"format", "pt"}});
/// volt::load_safetensors(model, "model.safetensors");              // strict: every key, every shape
/// auto file = volt::load_safetensors("model.safetensors");        // tensors + metadata, memory-mapped
/// ```
///
/// The file: 8 bytes holding the header's length N (unsigned, little-endian), N bytes of a JSON object (each
/// tensor's `dtype`, `shape` and `data_offsets` [begin, end) into the data; an optional `__metadata__` map of
/// strings to strings; spaces pad it to a multiple of 8 bytes), then the tensors' bytes, row-major and
/// little-endian, one after the other. volt writes the same bytes as Python's package for the same tensors
/// (tensors ordered by dtype, then name; `__metadata__` keys sorted, where Python's order varies from run to
/// run). The header is untrusted input: every length and offset is checked before any tensor is built
/// (volt/serialization/detail/safetensors_header.hpp says what the JSON reader accepts).
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/compat.hpp>
#include <volt/core/files.hpp>
#include <volt/core/mapped_file.hpp>
#include <volt/serialization/detail/safetensors_header.hpp>
#include <volt/serialization/weights.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

namespace volt {

/// The `__metadata__` of a safetensors file: free-form string keys and values (Python: `metadata={...}`).
using SafetensorsMetadata = std::map<std::string, std::string>;

/// What load_safetensors(path) returns: the tensors, in the order of their data in the file, and the metadata.
struct SafetensorsFile {
  StateDict tensors;             ///< Name -> tensor.
  SafetensorsMetadata metadata;  ///< The file's `__metadata__` (empty when it has none).
};

/// Options of load_safetensors(path, options).
struct SafetensorsLoadOptions {
  /// Where the tensors go. On the CPU with `mmap` they are views of the mapped file; elsewhere copies.
  torch::Device device = torch::kCPU;
  /// Memory-map the file (POSIX): CPU tensors share its pages, which are read from disk when first touched,
  /// and keep the mapping alive. The pages are private: writing to a tensor never changes the file. A tensor
  /// whose offset is not a multiple of its element size is copied instead. false: the file is read into
  /// memory first. Either way, the file must not be truncated by another program while mapped tensors live
  /// (the system then ends the process with SIGBUS on access).
  bool mmap = true;
};

namespace detail::safetensors {

VOLT_INLINE const DType& dtype_of(const torch::Tensor& tensor, const std::string& name);

VOLT_INLINE void check_little_endian();

/// Builds the tensors of a file's bytes (`file`), checked as parse_header does. `shown` names the file in
/// errors; `zero_copy` makes CPU tensors views of `file` (aligned ones).
VOLT_INLINE SafetensorsFile read(const std::shared_ptr<MappedFile>& file, const std::string& shown,
                                 const SafetensorsLoadOptions& options);

}  // namespace detail::safetensors

/// Writes `weights` to `path` in the safetensors format with `metadata` as its `__metadata__` (left out when
/// empty), readable by Python's `safetensors.torch.load_file` and by load_safetensors. Tensors are written
/// detached, contiguous and from the CPU, in every dtype the format names that this LibTorch has (bool, the
/// 8/16/32/64-bit integers, float16, bfloat16, float32, float64, complex64, and on newer LibTorch the float8
/// types, float4_e2m1fn_x2 and the unsigned 16/32/64-bit integers). Atomic: a temporary file next to `path`
/// is written, flushed to disk and renamed over it, so an existing file is never left torn. Throws
/// std::invalid_argument for an undefined tensor, a dtype the format has no name for, or a name or metadata
/// text that is not UTF-8 (or the name "__metadata__"); SafetensorsError naming `path` and the system error
/// when the file cannot be written. No rank check: under DDP call it on global rank 0 only.
VOLT_INLINE void save_safetensors(const StateDict& weights, const std::filesystem::path& path,
                                  const SafetensorsMetadata& metadata = {});

/// Writes the state_dict of `module` (see state_dict(): parameters and buffers under Python's dotted names)
/// to `path`; see save_safetensors(StateDict, path, metadata).
template <class Module>
  requires(!std::is_same_v<Module, StateDict>)
void save_safetensors(const Module& module, const std::filesystem::path& path, const SafetensorsMetadata& metadata = {}) {
  save_safetensors(state_dict(module), path, metadata);
}

/// Reads the safetensors file at `path`: its tensors (memory-mapped on the CPU by default, see
/// SafetensorsLoadOptions) and metadata. Throws SafetensorsError naming the file and what is wrong when it is
/// missing, unreadable, shorter than its header says, has a malformed header (bad JSON, unknown dtype, a
/// byte count that does not match dtype and shape, offsets with gaps, overlaps or past the end), or holds a
/// dtype this LibTorch lacks.
VOLT_INLINE SafetensorsFile load_safetensors(const std::filesystem::path& path, const SafetensorsLoadOptions& options = {});

/// Reads `path` (see load_safetensors(path)) and copies its tensors into `module`'s parameters and buffers
/// (on their devices and dtypes), as load_state_dict does: strict by default (every key of the module in the
/// file and every key of the file in the module), shapes checked either way. Throws SafetensorsError listing
/// every missing key, unexpected key and shape mismatch, naming the file; the module is then unchanged.
/// Returns the keys a non-strict load left out.
template <class Module>
  requires(!std::is_convertible_v<Module, std::filesystem::path>)
LoadWeightsResult load_safetensors(const Module& module, const std::filesystem::path& path,
                                   LoadWeightsOptions options = {}) {
  const auto file = load_safetensors(path);
  try {
    return load_state_dict(module, file.tensors, options);
  } catch (const std::runtime_error& cause) {
    throw SafetensorsError(std::string(cause.what()) + " (safetensors file " + path.string() + ")");
  }
}

}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/serialization/impl/safetensors.ipp>
#endif

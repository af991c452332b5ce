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
#include <random>
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

inline const DType& dtype_of(const torch::Tensor& tensor, const std::string& name) {
  for (const auto& dtype : dtypes) {
    if (dtype.torch_name.empty()) continue;
    if (const auto type = compat::scalar_type_named(dtype.torch_name); type && *type == tensor.scalar_type()) return dtype;
  }
  std::string allowed;
  for (const auto& dtype : dtypes) {
    if (!dtype.torch_name.empty() && compat::scalar_type_named(dtype.torch_name)) {
      allowed += (allowed.empty() ? "" : ", ") + std::string(dtype.torch_name);
    }
  }
  throw std::invalid_argument("volt: save_safetensors: the tensor \"" + name + "\" has the dtype " +
                              std::string(c10::toString(tensor.scalar_type())) +
                              ", which the safetensors format has no name for (allowed: " + allowed + ")");
}

inline void check_little_endian() {
  if constexpr (std::endian::native != std::endian::little) {
    throw SafetensorsError("volt: safetensors files are little-endian; this machine is not, and volt does not "
                           "convert byte order");
  }
}

/// Builds the tensors of a file's bytes (`file`), checked as parse_header does. `shown` names the file in
/// errors; `zero_copy` makes CPU tensors views of `file` (aligned ones).
inline SafetensorsFile read(const std::shared_ptr<MappedFile>& file, const std::string& shown,
                            const SafetensorsLoadOptions& options) {
  check_little_endian();
  const auto bad = [&shown](const std::string& what) {
    return SafetensorsError("volt: " + shown + " is not a valid safetensors file: " + what);
  };
  const std::uint64_t size = file->size();
  if (size < 8) throw bad("it holds " + std::to_string(size) + " bytes, fewer than the 8 of the header length");
  std::uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = header_size << 8 | static_cast<unsigned char>(file->data()[i]);
  if (header_size > max_header_size) {
    throw bad("the header length " + std::to_string(header_size) + " is over the limit of " +
              std::to_string(max_header_size) + " bytes");
  }
  if (header_size > size - 8) {
    throw bad("the header length " + std::to_string(header_size) + " is more than the " + std::to_string(size - 8) +
              " bytes after it (truncated file?)");
  }
  Header header;
  try {
    header = parse_header(std::string_view(file->data() + 8, header_size), size - 8 - header_size);
  } catch (const SafetensorsError& error) {
    throw bad(error.what());
  }
  char* const data = file->data() + 8 + header_size;
  SafetensorsFile result;
  result.metadata = std::move(header.metadata);
  const bool views = options.mmap && options.device.is_cpu();
  for (const auto& entry : header.tensors) {
    const auto type = entry.dtype->torch_name.empty() ? std::nullopt : compat::scalar_type_named(entry.dtype->torch_name);
    if (!type) {
      throw SafetensorsError("volt: " + shown + ": the tensor \"" + entry.name + "\" has the dtype " +
                             std::string(entry.dtype->name) + ", which this LibTorch (" + compat::torch_version_string +
                             ") has no type for" +
                             (entry.dtype->torch_name.empty() ? "" : " (" + std::string(entry.dtype->torch_name) +
                                                                         " is in newer LibTorch versions)"));
    }
    auto shape = entry.shape;
    if (entry.dtype->bits == 4) {  // F4: two elements per byte, LibTorch's Float4_e2m1fn_x2 counts bytes
      if (shape.empty() || shape.back() % 2 != 0) {
        throw SafetensorsError("volt: " + shown + ": the F4 tensor \"" + entry.name +
                               "\" has an odd last dimension (or none); LibTorch packs two F4 values per element");
      }
      shape.back() /= 2;
    }
    const auto tensor_options = torch::TensorOptions().dtype(*type);
    const std::int64_t element_size = static_cast<std::int64_t>(c10::elementSize(*type));
    torch::Tensor tensor;
    if (entry.end == entry.begin) {
      tensor = torch::empty(shape, tensor_options);
    } else if (views && (reinterpret_cast<std::uintptr_t>(data + entry.begin) % element_size) == 0) {
      tensor = torch::from_blob(data + entry.begin, shape, [keep = file](void*) mutable { keep.reset(); }, tensor_options);
    } else {
      tensor = torch::empty(shape, tensor_options);
      std::memcpy(tensor.data_ptr(), data + entry.begin, entry.end - entry.begin);
    }
    if (!options.device.is_cpu()) tensor = tensor.to(options.device);
    result.tensors.insert(entry.name, std::move(tensor));
  }
  return result;
}

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
inline void save_safetensors(const StateDict& weights, const std::filesystem::path& path,
                             const SafetensorsMetadata& metadata = {}) {
  namespace st = detail::safetensors;
  st::check_little_endian();
  for (const auto& [key, value] : metadata) {
    if (!st::valid_utf8(key) || !st::valid_utf8(value)) {
      throw std::invalid_argument("volt: save_safetensors: the metadata entry \"" + key + "\" is not valid UTF-8");
    }
  }
  std::vector<std::pair<st::Entry, torch::Tensor>> tensors;
  for (const auto& item : weights) {
    const std::string& name = item.key();
    if (!item.value().defined()) throw std::invalid_argument("volt: save_safetensors: the tensor \"" + name + "\" is undefined");
    if (name == "__metadata__" || !st::valid_utf8(name)) {
      throw std::invalid_argument("volt: save_safetensors: the tensor name \"" + name +
                                  "\" is not allowed (it must be UTF-8 and not \"__metadata__\")");
    }
    st::Entry entry;
    entry.name = name;
    entry.dtype = &st::dtype_of(item.value(), name);
    entry.shape = item.value().sizes().vec();
    if (entry.dtype->bits == 4) {
      if (entry.shape.empty()) {
        throw std::invalid_argument("volt: save_safetensors: the float4 tensor \"" + name + "\" has no dimensions");
      }
      entry.shape.back() *= 2;  // the format counts F4 values, LibTorch pairs of them
    }
    tensors.emplace_back(std::move(entry), item.value().detach().to(torch::kCPU).contiguous());
  }
  std::stable_sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) {
    return a.first.dtype->rank != b.first.dtype->rank ? a.first.dtype->rank > b.first.dtype->rank
                                                      : a.first.name < b.first.name;
  });
  std::vector<st::Entry> entries;
  std::uint64_t offset = 0;
  for (auto& [entry, tensor] : tensors) {
    entry.begin = offset;
    offset += static_cast<std::uint64_t>(tensor.numel()) * tensor.element_size();
    entry.end = offset;
    entries.push_back(entry);
  }
  const std::string header = st::write_header(entries, metadata);
  std::vector<std::string_view> pieces{header};
  for (const auto& [entry, tensor] : tensors) {
    if (entry.end > entry.begin) pieces.emplace_back(static_cast<const char*>(tensor.data_ptr()), entry.end - entry.begin);
  }

  const auto folder = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  std::error_code error;
  std::filesystem::create_directories(folder, error);
  if (error) throw SafetensorsError("volt: cannot create the folder " + folder.string() + ": " + error.message());
  std::random_device entropy;
  const auto temporary = folder / ("." + path.filename().string() + ".tmp" + std::to_string(entropy()));
  if (const auto failure = detail::write_file_durably(temporary, pieces)) {
    std::filesystem::remove(temporary, error);
    throw SafetensorsError("volt: could not write the safetensors file " + path.string() + ": " +
                           std::generic_category().message(failure->error) + " (after " +
                           std::to_string(failure->written) + " of " + std::to_string(header.size() + offset) +
                           " bytes; an existing file is kept)");
  }
  std::filesystem::rename(temporary, path, error);
  if (error) {
    std::filesystem::remove(temporary, error);
    throw SafetensorsError("volt: could not rename the new safetensors file over " + path.string() + ": " +
                           error.message());
  }
  detail::fsync_folder(folder);
}

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
inline SafetensorsFile load_safetensors(const std::filesystem::path& path, const SafetensorsLoadOptions& options = {}) {
  std::shared_ptr<detail::MappedFile> file;
  try {
    file = detail::MappedFile::open(path, options.mmap);
  } catch (const std::exception& error) {
    throw SafetensorsError("volt: could not read the safetensors file " + path.string() + ": " + error.what());
  }
  return detail::safetensors::read(file, path.string(), options);
}

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

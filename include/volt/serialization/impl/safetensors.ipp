/// \file
/// Definitions of the functions declared in volt/serialization/safetensors.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

#include <random>

namespace volt::detail::safetensors {

VOLT_INLINE const DType& dtype_of(const torch::Tensor& tensor, const std::string& name) {
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

VOLT_INLINE void check_little_endian() {
  if constexpr (std::endian::native != std::endian::little) {
    throw SafetensorsError("volt: safetensors files are little-endian; this machine is not, and volt does not "
                           "convert byte order");
  }
}

VOLT_INLINE SafetensorsFile read(const std::shared_ptr<MappedFile>& file, const std::string& shown,
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
}  // namespace volt::detail::safetensors

namespace volt {

VOLT_INLINE void save_safetensors(const StateDict& weights, const std::filesystem::path& path,
                                  const SafetensorsMetadata& metadata) {
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

VOLT_INLINE SafetensorsFile load_safetensors(const std::filesystem::path& path, const SafetensorsLoadOptions& options) {
  std::shared_ptr<detail::MappedFile> file;
  try {
    file = detail::MappedFile::open(path, options.mmap);
  } catch (const std::exception& error) {
    throw SafetensorsError("volt: could not read the safetensors file " + path.string() + ": " + error.what());
  }
  return detail::safetensors::read(file, path.string(), options);
}

}  // namespace volt

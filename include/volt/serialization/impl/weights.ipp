/// \file
/// Definitions of the functions declared in volt/serialization/weights.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

#include <random>

namespace volt::detail {

VOLT_INLINE const torch::nn::Module& weights_module(const torch::nn::Module& module) { return module; }

VOLT_INLINE void collect_state(const torch::nn::Module& module, const std::string& prefix, StateDict& out) {
  for (const auto& item : module.named_parameters(/*recurse=*/false)) out.insert(prefix + item.key(), item.value());
  for (const auto& item : module.named_buffers(/*recurse=*/false)) out.insert(prefix + item.key(), item.value());
  for (const auto& child : module.named_children()) collect_state(*child.value(), prefix + child.key() + ".", out);
}

VOLT_INLINE std::string python_shape(c10::IntArrayRef sizes) {
  std::string text = "torch.Size([";
  for (std::size_t i = 0; i < sizes.size(); ++i) text += (i ? ", " : "") + std::to_string(sizes[i]);
  return text + "])";
}

VOLT_INLINE std::string quoted_list(const std::vector<std::string>& keys) {
  std::string text;
  for (std::size_t i = 0; i < keys.size(); ++i) text += (i ? ", \"" : "\"") + keys[i] + "\"";
  return text;
}
}  // namespace volt::detail

namespace volt {

VOLT_INLINE void save_weights(const StateDict& weights, const std::filesystem::path& path) {
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  tensors.reserve(weights.size());
  for (const auto& item : weights) {
    if (!item.value().defined()) {
      throw std::invalid_argument("volt: save_weights: the tensor \"" + item.key() + "\" is undefined");
    }
    tensors.emplace_back(item.key(), item.value().detach().to(torch::kCPU).contiguous());
  }
  const std::string pickle = detail::pickle::state_dict_pickle(tensors);

  const auto folder = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  std::error_code error;
  std::filesystem::create_directories(folder, error);
  detail::remove_stale_temporaries(path);  // left by a write that was killed before its rename
  std::random_device entropy;
  const auto temporary = folder / ("." + path.filename().string() + ".tmp" + std::to_string(entropy()));
  try {
    {
      std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
      if (!out) throw std::runtime_error("cannot create " + temporary.string());
      caffe2::serialize::PyTorchStreamWriter writer([&out](const void* data, std::size_t size) -> std::size_t {
        out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
        return out ? size : 0;
      });
      writer.writeRecord("data.pkl", pickle.data(), pickle.size());
      writer.writeRecord("byteorder", "little", 6);
      for (std::size_t i = 0; i < tensors.size(); ++i) {
        const auto& tensor = tensors[i].second;
        writer.writeRecord("data/" + std::to_string(i), tensor.data_ptr(), tensor.numel() * tensor.element_size());
      }
      writer.writeEndOfFile();
      out.flush();
      if (!out) throw std::runtime_error("write error");
    }
    detail::fsync_file(temporary);
    std::filesystem::rename(temporary, path);
  } catch (const std::exception& cause) {
    std::filesystem::remove(temporary, error);
    throw std::runtime_error("volt: could not write the weights file " + path.string() + ": " + cause.what());
  }
}

VOLT_INLINE StateDict load_weights(const std::filesystem::path& path, torch::Device map_location) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) {
    throw std::runtime_error("volt: weights file " + path.string() + " does not exist or is not a file");
  }
  try {
    std::string bytes;
    if (const int failure = detail::read_file_bytes(path, bytes); failure != 0) {
      throw std::runtime_error("cannot read it: " + std::generic_category().message(failure));
    }
    if (bytes.size() < 4 || bytes.compare(0, 4, std::string("PK\x03\x04", 4)) != 0) {
      throw std::runtime_error("it is not a zip archive (torch.save's format since torch 1.6)");
    }
    const auto entries = detail::read_zip_entries(bytes, path.string(), "weights file");
    if (!detail::is_torch_save_file(entries)) throw std::runtime_error("no data.pkl record");
    // Lenient: a Lightning checkpoint's other entries may hold objects (never rebuilt); only tensors are used.
    const auto loaded = detail::torch_load_entries(entries, path.string(), /*lenient=*/true);
    const auto* dict = std::get_if<detail::pickle::Dict>(&loaded.root->data);
    if (dict == nullptr) throw std::runtime_error("the file holds something other than a dict of tensors");
    // A checkpoint (volt's or Lightning's): its "state_dict" entry.
    for (const auto& [key, value] : dict->items) {
      const auto* name = std::get_if<std::string>(&key->data);
      if (name != nullptr && *name == "state_dict" && std::holds_alternative<detail::pickle::Dict>(value->data)) {
        dict = &std::get<detail::pickle::Dict>(value->data);
        break;
      }
    }
    StateDict result;
    for (const auto& [key, value] : dict->items) {
      const auto* name = std::get_if<std::string>(&key->data);
      const auto* tensor = std::get_if<torch::Tensor>(&value->data);
      if (name == nullptr || tensor == nullptr) {
        throw std::runtime_error("the dict holds an entry that is not a string -> tensor pair" +
                                 (name ? " (key \"" + *name + "\")" : std::string()));
      }
      if (result.contains(*name)) throw std::runtime_error("the key \"" + *name + "\" appears twice");
      // Views of one storage become separate tensors, as after load_state_dict copies them.
      result.insert(*name, tensor->to(map_location).clone(at::MemoryFormat::Contiguous));
    }
    return result;
  } catch (const std::exception& cause) {
    throw std::runtime_error("volt: could not read the weights file " + path.string() +
                             " (a torch.save'd state_dict or checkpoint): " + cause.what());
  }
}

}  // namespace volt

/// \file
/// Definitions of the functions declared in volt/serialization/weights.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

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
    caffe2::serialize::PyTorchStreamReader reader(path.string());
    if (!reader.hasRecord("data.pkl")) throw std::runtime_error("no data.pkl record");
    const auto [pickle_data, pickle_size] = reader.getRecord("data.pkl");
    const std::string_view pickle(static_cast<const char*>(pickle_data.get()), pickle_size);
    auto load_storage = [&reader, &path](const std::string& key, c10::ScalarType dtype, std::int64_t numel) {
      const std::string record = "data/" + key;
      if (!reader.hasRecord(record)) throw std::runtime_error("missing storage record " + record);
      auto [data, size] = reader.getRecord(record);
      auto storage = torch::empty({numel}, torch::TensorOptions().dtype(dtype));
      const auto expected = static_cast<std::size_t>(numel) * storage.element_size();
      if (size < expected) {
        throw std::runtime_error("storage record " + record + " of " + path.filename().string() + " holds " +
                                 std::to_string(size) + " bytes, expected " + std::to_string(expected));
      }
      if (expected > 0) std::memcpy(storage.data_ptr(), data.get(), expected);
      return storage;
    };
    detail::pickle::Reader unpickler(pickle, load_storage);
    const auto root = unpickler.read();
    const auto* dict = std::get_if<detail::pickle::Dict>(&root->data);
    if (dict == nullptr) throw std::runtime_error("the file holds something other than a dict of tensors");
    StateDict result;
    for (const auto& [key, value] : dict->items) {
      const auto* name = std::get_if<std::string>(&key->data);
      const auto* tensor = std::get_if<torch::Tensor>(&value->data);
      if (name == nullptr || tensor == nullptr) {
        throw std::runtime_error("the dict holds an entry that is not a string -> tensor pair" +
                                 (name ? " (key \"" + *name + "\")" : std::string()));
      }
      // Views of one storage become separate tensors, as after load_state_dict copies them.
      result.insert(*name, tensor->to(map_location).clone(at::MemoryFormat::Contiguous));
    }
    return result;
  } catch (const std::exception& cause) {
    throw std::runtime_error("volt: could not read the weights file " + path.string() +
                             " (a torch.save'd state_dict): " + cause.what());
  }
}

}  // namespace volt

/// \file
/// Definitions of the functions declared in volt/serialization/detail/torch_save.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE std::string torch_save_bytes(const pickle::Value& root) {
  std::vector<torch::Tensor> storages;
  const std::string pickle = pickle::value_pickle(root, storages);
  std::string bytes;
  caffe2::serialize::PyTorchStreamWriter writer([&bytes](const void* data, std::size_t size) -> std::size_t {
    bytes.append(static_cast<const char*>(data), size);
    return size;
  });
  writer.writeRecord("data.pkl", pickle.data(), pickle.size());
  writer.writeRecord("byteorder", "little", 6);
  for (std::size_t i = 0; i < storages.size(); ++i) {
    const auto& storage = storages[i];
    writer.writeRecord("data/" + std::to_string(i), storage.data_ptr(),
                       static_cast<std::size_t>(storage.numel()) * storage.element_size());
  }
  writer.writeEndOfFile();
  return bytes;
}

VOLT_INLINE bool is_torch_save_file(const std::vector<ZipEntry>& entries) {
  const auto ends_with = [](std::string_view text, std::string_view suffix) {
    return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  bool pickle = false;
  for (const auto& entry : entries) {
    if (ends_with(entry.name, "/constants.pkl")) return false;
    if (ends_with(entry.name, "/data.pkl")) pickle = true;
  }
  return pickle;
}

VOLT_INLINE TorchLoaded torch_load_entries(const std::vector<ZipEntry>& entries, const std::string& shown,
                                           bool lenient) {
  // The records of one archive: "<name>/data.pkl" and "<name>/data/<key>" for its storages.
  const ZipEntry* pickle = nullptr;
  for (const auto& entry : entries) {
    const auto slash = entry.name.find('/');
    if (slash != std::string::npos && entry.name.compare(slash, std::string::npos, "/data.pkl") == 0) {
      if (pickle != nullptr) throw CheckpointError("volt: " + shown + " holds more than one data.pkl");
      pickle = &entry;
    }
  }
  if (pickle == nullptr) throw CheckpointError("volt: " + shown + " is not a torch.save file: it has no data.pkl");
  const std::string prefix = pickle->name.substr(0, pickle->name.size() - std::string_view("data.pkl").size());
  std::map<std::string, const ZipEntry*, std::less<>> records;
  for (const auto& entry : entries) {
    if (entry.name.compare(0, prefix.size() + 5, prefix + "data/") == 0) {
      records.emplace(entry.name.substr(prefix.size() + 5), &entry);
    }
  }
  auto load_storage = [&](const std::string& key, c10::ScalarType dtype, std::int64_t numel) {
    const auto found = records.find(key);
    if (found == records.end()) throw std::runtime_error("missing storage record " + prefix + "data/" + key);
    const auto content = found->second->content();
    const auto item = static_cast<std::int64_t>(c10::elementSize(dtype));
    if (numel < 0 || numel > static_cast<std::int64_t>(content.size()) / item) {
      throw std::runtime_error("storage record " + found->second->name + " holds " + std::to_string(content.size()) +
                               " bytes, fewer than " + std::to_string(numel) + " elements of " +
                               std::string(c10::toString(dtype)));
    }
    auto storage = torch::empty({numel}, torch::TensorOptions().dtype(dtype));
    if (numel > 0) std::memcpy(storage.data_ptr(), content.data(), static_cast<std::size_t>(numel * item));
    return storage;
  };
  TorchLoaded loaded;
  const auto text = pickle->content();
  loaded.reader = std::make_unique<pickle::Reader>(text, load_storage, lenient);
  try {
    loaded.root = loaded.reader->read();
  } catch (const std::exception& cause) {
    throw CheckpointError("volt: " + shown + " cannot be read: " + cause.what());
  }
  return loaded;
}

}  // namespace volt::detail

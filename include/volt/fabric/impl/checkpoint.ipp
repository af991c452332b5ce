/// \file
/// Definitions of the functions declared in volt/fabric/checkpoint.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE void write_fabric_checkpoint(const std::filesystem::path& path, const FabricState& state,
                                         const GradScaler* scaler) {
  torch::serialize::OutputArchive archive;
  for (const auto& [name, entry] : state) {
    torch::serialize::OutputArchive part;
    entry.save(part);
    archive.write(name, part);
  }
  if (scaler != nullptr) {
    torch::serialize::OutputArchive part;
    scaler->save(part);
    archive.write(std::string(fabric_precision_state_key), part);
  }
  save_archive_atomically(archive, path);
}

VOLT_INLINE std::vector<std::string> read_fabric_checkpoint(const std::filesystem::path& path, const FabricState& state,
                                                            bool strict, torch::Device device, GradScaler* scaler) {
  torch::serialize::InputArchive archive;
  load_archive(archive, path, device);
  const std::vector<std::string> keys = archive.keys();
  auto in_file = [&](const std::string& key) { return std::find(keys.begin(), keys.end(), key) != keys.end(); };
  for (const auto& [name, entry] : state) {
    if (!in_file(name)) {
      if (strict) {
        throw std::runtime_error("The requested state contains a key '" + name +
                                 "' that does not exist in the loaded checkpoint. To disable strict loading, set "
                                 "`strict=False`. (file " + path.string() + ")");
      }
      continue;
    }
    torch::serialize::InputArchive part;
    archive.read(name, part);
    try {
      entry.load(part, device);
    } catch (const std::exception& cause) {
      throw CheckpointError("volt: the entry '" + name + "' of " + path.string() +
                            " does not match the object passed to load(): " + cause.what());
    }
  }
  if (scaler != nullptr && in_file(std::string(fabric_precision_state_key))) {
    torch::serialize::InputArchive part;
    archive.read(std::string(fabric_precision_state_key), part);
    scaler->load(part);
  }
  std::vector<std::string> remainder;
  for (const auto& key : keys) {
    if (state.count(key) == 0 && key != fabric_precision_state_key) remainder.push_back(key);
  }
  return remainder;
}

}  // namespace volt::detail

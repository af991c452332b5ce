/// \file
/// The file side of Fabric::save and Fabric::load: a FabricState (and the GradScaler's state) into one
/// archive and back; implementation of volt::Fabric, no public API.
#pragma once

#include <volt/fabric/state.hpp>
#include <volt/precision/grad_scaler.hpp>
#include <volt/serialization/checkpoint_io.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <exception>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace volt::detail {

/// The key under which Fabric::save stores the GradScaler's state (Fabric::precision_state_key).
inline constexpr std::string_view fabric_precision_state_key = "volt.precision";

/// Fabric::save's write (on rank zero): every entry of `state` under its name, then `scaler`'s state when
/// there is a scaler, written atomically to `path`. Throws CheckpointError naming the file.
inline void write_fabric_checkpoint(const std::filesystem::path& path, const FabricState& state,
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

/// Fabric::load's read (on every rank): restores every entry of `state` from `path` in place, tensors mapped
/// to `device`, and `scaler`'s state when there is a scaler and the file has its state. Returns the names in
/// the file that `state` did not ask for. Throws as Fabric::load documents.
inline std::vector<std::string> read_fabric_checkpoint(const std::filesystem::path& path, const FabricState& state,
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

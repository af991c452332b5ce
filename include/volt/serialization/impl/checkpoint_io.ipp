/// \file
/// Definitions of the functions declared in volt/serialization/checkpoint_io.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

#include <random>

namespace volt::detail {

VOLT_INLINE std::string system_error_text(int error) { return std::generic_category().message(error); }

VOLT_INLINE void write_file_synced(const std::filesystem::path& path, const std::string& bytes, const std::string& shown) {
  const FileWriteFault fault{checkpoint_write_fault_after_bytes.load(), checkpoint_write_fault_errno.load()};
  const auto failure = write_file_durably(path, bytes, fault);
  if (!failure) return;
  const std::string prefix = "volt: could not write the checkpoint " + shown + ": ";
  const std::string kept = " (the previous checkpoint, if any, is kept)";
  switch (failure->stage) {
    case FileWriteStage::create:
      throw CheckpointError(prefix + "cannot create " + path.string() + ": " + system_error_text(failure->error));
    case FileWriteStage::write:
      throw CheckpointError(prefix + "write failed after " + std::to_string(failure->written) + " of " +
                            std::to_string(bytes.size()) + " bytes: " + system_error_text(failure->error) + kept);
    case FileWriteStage::flush:
      throw CheckpointError(prefix + "could not flush it to disk: " + system_error_text(failure->error) + kept);
    case FileWriteStage::close:
      throw CheckpointError(prefix + "closing " + path.string() + " failed: " + system_error_text(failure->error));
    case FileWriteStage::stream:
      break;
  }
  throw CheckpointError(prefix + "writing " + path.string() + " failed");
}

VOLT_INLINE void save_archive_atomically(torch::serialize::OutputArchive& archive, const std::filesystem::path& path) {
  const auto folder = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  std::error_code error;
  std::filesystem::create_directories(folder, error);
  if (error) {
    throw CheckpointError("volt: cannot create the checkpoint folder " + folder.string() + ": " + error.message());
  }
  std::string bytes;
  try {
    bytes = torch_save_bytes(*checkpoint_layout(*archive_tree(archive)));
  } catch (const std::exception& cause) {
    throw CheckpointError("volt: could not serialize the checkpoint " + path.string() + ": " + cause.what());
  }
  remove_stale_temporaries(path);  // left by a write that was killed before its rename
  std::random_device entropy;
  const auto temporary = folder / ("." + path.filename().string() + ".tmp" + std::to_string(entropy()));
  try {
    write_file_synced(temporary, bytes, path.string());
    std::filesystem::rename(temporary, path);
  } catch (const CheckpointError&) {
    std::filesystem::remove(temporary, error);
    throw;
  } catch (const std::exception& cause) {
    std::filesystem::remove(temporary, error);
    throw CheckpointError("volt: could not write the checkpoint " + path.string() + ": " + cause.what() +
                          " (the previous checkpoint, if any, is kept)");
  }
  fsync_folder(folder);
}

VOLT_INLINE std::uint32_t crc32(const char* data, std::size_t size) { return crc32(std::string_view(data, size)); }

VOLT_INLINE void check_zip_integrity(const std::string& bytes, const std::string& shown,
                                     std::vector<std::string>* names) {
  const auto entries = read_zip_entries(bytes, shown);
  if (names != nullptr) {
    for (const auto& entry : entries) names->push_back(entry.name);
  }
}

VOLT_INLINE void load_archive_bytes(torch::serialize::InputArchive& archive, const std::string& bytes,
                                    const std::string& shown, torch::Device device) {
  if (bytes.empty()) throw CheckpointError("volt: checkpoint file " + shown + " is empty");
  // LibTorch archives are zip files: they start with a local file header "PK\3\4".
  if (bytes.size() < 4 || bytes.compare(0, 4, std::string("PK\x03\x04", 4)) != 0) {
    throw CheckpointError("volt: " + shown + " is not a readable checkpoint: it does not start with a zip header, "
                          "so it is not a LibTorch archive (a foreign or corrupted file, " +
                          std::to_string(bytes.size()) + " bytes)");
  }
  const auto entries = read_zip_entries(bytes, shown);
  if (is_torch_save_file(entries)) {
    const auto loaded = torch_load_entries(entries, shown, /*lenient=*/true);
    const auto* root = std::get_if<pickle::Dict>(&loaded.root->data);
    if (!is_volt_checkpoint(*loaded.root)) {
      const bool lightning = root != nullptr && std::any_of(root->items.begin(), root->items.end(), [](const auto& item) {
        const auto* key = std::get_if<std::string>(&item.first->data);
        return key != nullptr && *key == "pytorch-lightning_version";
      });
      if (lightning) {
        throw CheckpointError("volt: " + shown + " is a Lightning checkpoint, not a volt one: volt resumes only "
                              "from its own checkpoints; load its weights with volt::load_weights(model, path) "
                              "(it reads the checkpoint's state_dict)");
      }
      throw CheckpointError("volt: " + shown + " is a weights file (a state_dict in torch.save's format, as "
                            "volt::save_weights and Python's torch.save(model.state_dict()) write), not a volt "
                            "checkpoint: load it with volt::load_weights(model, path)");
    }
    const auto tree = archive_of_layout(*loaded.root, shown);
    try {
      load_archive_tree(*tree, archive, device, shown);
    } catch (const CheckpointError&) {
      throw;
    } catch (const std::exception& cause) {
      throw CheckpointError("volt: " + shown + " is not a readable checkpoint: " + cause.what());
    }
    return;
  }
  log::warn_once("volt: " + shown + " is a checkpoint in volt's earlier format (a LibTorch archive), read "
                 "through LibTorch for this release only: load it and save it again to write volt's current "
                 "format, which Python's torch.load reads");
  try {
    archive.load_from(bytes.data(), bytes.size(), device);
  } catch (const std::exception& cause) {
    throw CheckpointError("volt: " + shown + " is not a readable checkpoint (truncated or corrupted, " +
                          std::to_string(bytes.size()) + " bytes): " + cause.what());
  }
}

VOLT_INLINE void load_archive(torch::serialize::InputArchive& archive, const std::filesystem::path& path,
                              torch::Device device) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) {
    throw CheckpointError("volt: checkpoint file " + path.string() + " does not exist or is not a file");
  }
  std::string content;
  if (const int failure = read_file_bytes(path, content); failure != 0) {
    throw CheckpointError("volt: cannot read the checkpoint file " + path.string() + ": " +
                          system_error_text(failure));
  }
  load_archive_bytes(archive, content, path.string(), device);
}

VOLT_INLINE void load_weights_from_archive(torch::nn::Module& module, torch::serialize::InputArchive& archive,
                                           const std::string& shown) {
  const CheckpointReader reader(archive, shown);
  reader.read_int("volt/format");
  torch::serialize::InputArchive model_archive;
  if (!reader.try_read_archive("model", model_archive)) {
    throw CheckpointError("volt: " + shown + " is not a volt checkpoint or is corrupted: it has no model");
  }
  check_model_matches(model_archive, module, shown);
  try {
    module.load(model_archive);
  } catch (const std::exception& cause) {
    throw CheckpointError("volt: the model in " + shown + " cannot be loaded: " + cause.what());
  }
}
}  // namespace volt::detail

namespace volt {

VOLT_INLINE void load_checkpoint_weights(torch::nn::Module& module, const std::filesystem::path& path,
                                         torch::Device device) {
  torch::serialize::InputArchive archive;
  detail::load_archive(archive, path, device);
  detail::load_weights_from_archive(module, archive, path.string());
}
}  // namespace volt

namespace volt::detail {

VOLT_INLINE bool CheckpointReader::contains(const std::string& key) const {
  c10::IValue value;
  return archive_.try_read(key, value);
}

VOLT_INLINE auto CheckpointReader::read_int_list(const std::string& key) const -> std::vector<std::int64_t> {
  return read_value(key, &c10::IValue::isIntList, "a list of integers").toIntVector();
}

VOLT_INLINE torch::Tensor CheckpointReader::read_tensor(const std::string& key) const {
  torch::Tensor tensor;
  if (!archive_.try_read(key, tensor, /*is_buffer=*/true)) throw entry_error(key, "a tensor");
  return tensor;
}

VOLT_INLINE void CheckpointReader::read_archive(const std::string& key, torch::serialize::InputArchive& into) const {
  if (!archive_.try_read(key, into)) throw entry_error(key, "an archive");
}

VOLT_INLINE bool CheckpointReader::try_read_archive(const std::string& key, torch::serialize::InputArchive& into) const {
  return archive_.try_read(key, into);
}

VOLT_INLINE auto CheckpointReader::read_value(const std::string& key, bool (c10::IValue::*has_type)() const,
                                              const char* type) const -> c10::IValue {
  c10::IValue value;
  if (!archive_.try_read(key, value) || !(value.*has_type)()) throw entry_error(key, type);
  return value;
}

VOLT_INLINE auto CheckpointReader::entry_error(const std::string& key, const char* type) const -> CheckpointError {
  return CheckpointError("volt: " + shown_ + " is not a volt checkpoint or is corrupted: entry '" + key +
                         "' is missing or not " + type);
}
}  // namespace volt::detail

namespace volt::testing {

VOLT_INLINE ScopedCheckpointWriteFault::~ScopedCheckpointWriteFault() {
  detail::checkpoint_write_fault_after_bytes = previous_after_;
  detail::checkpoint_write_fault_errno = previous_errno_;
}

}  // namespace volt::testing

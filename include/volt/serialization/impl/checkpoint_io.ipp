/// \file
/// Definitions of the functions declared in volt/serialization/checkpoint_io.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

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
  std::ostringstream buffer(std::ios::binary);
  try {
    archive.save_to(buffer);
  } catch (const std::exception& cause) {
    throw CheckpointError("volt: could not serialize the checkpoint " + path.string() + ": " + cause.what());
  }
  const std::string bytes = std::move(buffer).str();
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
  const auto u16 = [&](std::size_t at) {
    return static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[at])) |
           static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[at + 1])) << 8;
  };
  const auto u32 = [&](std::size_t at) { return u16(at) | u16(at + 2) << 16; };
  const auto damaged = [&](const std::string& what) {
    throw CheckpointError("volt: " + shown + " is not a readable checkpoint (truncated or corrupted, " +
                          std::to_string(bytes.size()) + " bytes): " + what);
  };
  // The end-of-central-directory record: 22 bytes plus a comment of at most 65535 bytes, at the end.
  std::size_t end_record = std::string::npos;
  for (std::size_t back = 22; back <= bytes.size() && back <= 22 + 65535; ++back) {
    const std::size_t at = bytes.size() - back;
    if (u32(at) == 0x06054b50U) {
      end_record = at;
      break;
    }
  }
  if (end_record == std::string::npos) damaged("no zip end-of-archive record (the end of the file is missing)");
  const std::uint32_t entries = u16(end_record + 10);
  const std::uint32_t directory_size = u32(end_record + 12);
  const std::uint32_t directory_offset = u32(end_record + 16);
  if (entries == 0xFFFFU || directory_offset == 0xFFFFFFFFU) return;  // zip64: left to LibTorch
  if (static_cast<std::uint64_t>(directory_offset) + directory_size > end_record) {
    damaged("the zip directory lies outside the file");
  }
  std::size_t at = directory_offset;
  for (std::uint32_t entry = 0; entry < entries; ++entry) {
    if (at + 46 > end_record || u32(at) != 0x02014b50U) damaged("the zip directory is damaged");
    const std::size_t at_entry = at;
    const std::uint32_t method = u16(at + 10);
    const std::uint32_t crc = u32(at + 16);
    const std::uint32_t stored_size = u32(at + 20);
    const std::uint32_t name_size = u16(at + 28);
    const std::uint32_t header_extra = u16(at + 30) + u16(at + 32);
    const std::uint32_t local = u32(at + 42);
    if (at + 46 + name_size > end_record) damaged("the zip directory is damaged");
    const std::string name = bytes.substr(at + 46, name_size);
    if (names != nullptr) names->push_back(name);
    at += 46 + name_size + header_extra;
    if (stored_size == 0xFFFFFFFFU || local == 0xFFFFFFFFU) return;  // zip64
    if (static_cast<std::uint64_t>(local) + 30 > bytes.size() || u32(local) != 0x04034b50U) {
      damaged("the entry '" + name + "' has no valid local header");
    }
    const std::uint64_t data = static_cast<std::uint64_t>(local) + 30 + u16(local + 26) + u16(local + 28);
    if (data + stored_size > bytes.size()) damaged("the entry '" + name + "' is cut off");
    if (method == 8) {  // deflated (LibTorch compresses an archive's code/*.py): inflated here and checked
      const std::uint32_t inflated_size = u32(at_entry + 24);
      const auto inflated = inflate::raw(std::string_view(bytes).substr(data, stored_size), inflated_size);
      if (!inflated || inflated->size() != inflated_size) damaged("the compressed entry '" + name + "' is damaged");
      if (crc32(inflated->data(), inflated->size()) != crc) damaged("the entry '" + name + "' fails its CRC-32 check");
      continue;
    }
    if (method != 0) damaged("the entry '" + name + "' uses an unknown compression method " + std::to_string(method));
    if (crc32(bytes.data() + data, stored_size) != crc) damaged("the entry '" + name + "' fails its CRC-32 check");
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
  std::vector<std::string> names;
  check_zip_integrity(bytes, shown, &names);
  // A LibTorch archive holds `<name>/constants.pkl`; torch.save's format (volt::save_weights) a data.pkl only.
  const auto has = [&](const std::string& suffix) {
    return std::any_of(names.begin(), names.end(), [&](const std::string& name) {
      return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    });
  };
  if (has("/data.pkl") && !has("/constants.pkl")) {
    throw CheckpointError("volt: " + shown + " is a weights file (a state_dict in torch.save's format, as "
                          "volt::save_weights and Python's torch.save(model.state_dict()) write), not a volt "
                          "checkpoint: load it with volt::load_weights(model, path)");
  }
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

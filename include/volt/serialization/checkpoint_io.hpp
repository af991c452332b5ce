/// \file
/// Checkpoint files that survive crashes and report bad input clearly (volt::CheckpointError).
///
/// Writing: the archive is serialized in memory, written to a temporary file in the target's folder, flushed
/// to disk (fsync), renamed over the target, and the folder is flushed; a crash at any point leaves either the
/// old or the new file, never a torn one. A failed write (disk full, permission denied) throws CheckpointError
/// naming the file and the system error, removes the temporary file and leaves the previous checkpoint as it was.
/// Reading: a missing, empty, truncated, corrupted or foreign file throws CheckpointError naming the file and
/// what is wrong (the zip structure and every entry's CRC-32 are checked before LibTorch parses the file); a
/// model that does not match the checkpoint (missing or extra keys, other shapes) throws CheckpointError listing
/// the keys and shapes.
/// volt::testing::ScopedCheckpointWriteFault injects write failures for tests.
#pragma once

#include <volt/core/encoding.hpp>
#include <volt/core/files.hpp>
#include <volt/serialization/detail/inflate.hpp>
#include <volt/serialization/detail/model_match.hpp>

#include <torch/torch.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <algorithm>
#include <fstream>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace volt {


namespace detail {

/// Test probe: a checkpoint write fails with `checkpoint_write_fault_errno` once this many bytes of the
/// temporary file were written; -1 (the default) means never. Set through testing::ScopedCheckpointWriteFault.
inline std::atomic<std::int64_t> checkpoint_write_fault_after_bytes{-1};
inline std::atomic<int> checkpoint_write_fault_errno{0};

inline std::string system_error_text(int error) { return std::generic_category().message(error); }


/// Writes `bytes` to a new file at `path` and flushes it to disk (detail::write_file_durably, with the test
/// fault of ScopedCheckpointWriteFault). Throws CheckpointError (naming `shown` and the system error) on any
/// failure; the caller removes the partial file.
inline void write_file_synced(const std::filesystem::path& path, const std::string& bytes, const std::string& shown) {
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

/// Saves `archive` to `path` atomically (temporary file, fsync, rename, folder fsync). On failure the
/// previous file at `path` is untouched, the temporary file is removed, and CheckpointError names `path`
/// and the system error (e.g. "No space left on device"). Temporary files of `path` left by a killed
/// earlier write are removed first.
inline void save_archive_atomically(torch::serialize::OutputArchive& archive, const std::filesystem::path& path) {
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

/// CRC-32 of `size` bytes at `data` (zip entries).
inline std::uint32_t crc32(const char* data, std::size_t size) { return crc32(std::string_view(data, size)); }

/// Checks the zip structure of a LibTorch archive and the CRC-32 of every stored entry before LibTorch parses
/// it: LibTorch verifies no checksum and its readers are not hardened against damaged input (a flipped byte
/// in the TorchScript code of an archive crashes LibTorch 1.13). Deflated entries are inflated by volt's own
/// bounds-checked decoder (detail/inflate.hpp) and their CRC-32 checked too. Archives in zip64 form are left
/// to LibTorch. Throws CheckpointError naming `shown` and the damaged entry.
/// `names`, when given, receives the names of the entries checked.
inline void check_zip_integrity(const std::string& bytes, const std::string& shown,
                                std::vector<std::string>* names = nullptr) {
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

/// Loads an archive from `bytes` (the content of the file `shown`), mapping every tensor to `device`.
/// Throws CheckpointError saying what is wrong: empty, not a zip archive (foreign file), truncated or corrupted.
inline void load_archive_bytes(torch::serialize::InputArchive& archive, const std::string& bytes,
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

/// Loads an archive, mapping every tensor to `device`. Names the file in any error (see load_archive_bytes).
inline void load_archive(torch::serialize::InputArchive& archive, const std::filesystem::path& path,
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

/// Reads the entries of a loaded volt checkpoint (the archive of the file `shown`), each with a
/// CheckpointError naming the file and the entry when it is missing or of another type:
/// "volt: <file> is not a volt checkpoint or is corrupted: entry '<key>' is missing or not <a type>".
/// Holds a reference to the archive, which must outlive it.
class CheckpointReader {
 public:
  /// Reads from `archive`, naming the file `shown` in errors.
  CheckpointReader(torch::serialize::InputArchive& archive, std::string shown)
      : archive_(archive), shown_(std::move(shown)) {}

  /// Whether the checkpoint has an entry `key`, of any type.
  bool contains(const std::string& key) const {
    c10::IValue value;
    return archive_.try_read(key, value);
  }

  /// The int entry `key`.
  std::int64_t read_int(const std::string& key) const { return read_value(key, &c10::IValue::isInt, "an integer").toInt(); }

  /// The bool entry `key`.
  bool read_bool(const std::string& key) const { return read_value(key, &c10::IValue::isBool, "a bool").toBool(); }

  /// The int list entry `key` (written as a c10::List<std::int64_t>).
  std::vector<std::int64_t> read_int_list(const std::string& key) const {
    return read_value(key, &c10::IValue::isIntList, "a list of integers").toIntVector();
  }

  /// The tensor entry `key`, written as a buffer (`archive.write(key, tensor, /*is_buffer=*/true)`), on the
  /// device the archive was loaded to.
  torch::Tensor read_tensor(const std::string& key) const {
    torch::Tensor tensor;
    if (!archive_.try_read(key, tensor, /*is_buffer=*/true)) throw entry_error(key, "a tensor");
    return tensor;
  }

  /// The nested archive `key` (an OutputArchive written into the checkpoint) into `into`.
  void read_archive(const std::string& key, torch::serialize::InputArchive& into) const {
    if (!archive_.try_read(key, into)) throw entry_error(key, "an archive");
  }

  /// The nested archive `key` into `into` if the checkpoint has one: false (and `into` untouched) when the
  /// entry is missing or is not an archive, as InputArchive::try_read. For optional entries; never throws
  /// CheckpointError.
  bool try_read_archive(const std::string& key, torch::serialize::InputArchive& into) const {
    return archive_.try_read(key, into);
  }

  /// The archive read from.
  torch::serialize::InputArchive& archive() const noexcept { return archive_; }
  /// The file name shown in errors.
  const std::string& shown() const noexcept { return shown_; }

 private:
  c10::IValue read_value(const std::string& key, bool (c10::IValue::*has_type)() const, const char* type) const {
    c10::IValue value;
    if (!archive_.try_read(key, value) || !(value.*has_type)()) throw entry_error(key, type);
    return value;
  }

  CheckpointError entry_error(const std::string& key, const char* type) const {
    return CheckpointError("volt: " + shown_ + " is not a volt checkpoint or is corrupted: entry '" + key +
                           "' is missing or not " + type);
  }

  torch::serialize::InputArchive& archive_;
  std::string shown_;
};

}  // namespace detail

/// Loads only the model weights of a volt checkpoint (a full one or one saved with save_weights_only) into
/// `module`, mapping tensors to `device`. Call it on any rank, outside fit(). Throws CheckpointError naming the
/// file for a missing, truncated, corrupted or foreign file, and listing keys and shapes for another model.
inline void load_checkpoint_weights(torch::nn::Module& module, const std::filesystem::path& path,
                                    torch::Device device = torch::kCPU);

namespace detail {

/// load_checkpoint_weights on the bytes of the file `shown` (loaded into `archive`, which the caller may read
/// further). Throws CheckpointError only.
inline void load_weights_from_archive(torch::nn::Module& module, torch::serialize::InputArchive& archive,
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

}  // namespace detail

inline void load_checkpoint_weights(torch::nn::Module& module, const std::filesystem::path& path,
                                    torch::Device device) {
  torch::serialize::InputArchive archive;
  detail::load_archive(archive, path, device);
  detail::load_weights_from_archive(module, archive, path.string());
}

namespace testing {

/// Makes every checkpoint write in this process fail once `after_bytes` bytes of the file are written, with
/// the system error `error` (default ENOSPC, "No space left on device"), while alive. For tests of the
/// disk-full path; not thread-safe against concurrent instances.
class ScopedCheckpointWriteFault {
 public:
  /// Installs the fault; the destructor restores the previous setting (so instances nest).
  explicit ScopedCheckpointWriteFault(std::int64_t after_bytes, int error = ENOSPC)
      : previous_after_(detail::checkpoint_write_fault_after_bytes.exchange(after_bytes)),
        previous_errno_(detail::checkpoint_write_fault_errno.exchange(error)) {}
  ~ScopedCheckpointWriteFault() {
    detail::checkpoint_write_fault_after_bytes = previous_after_;
    detail::checkpoint_write_fault_errno = previous_errno_;
  }
  ScopedCheckpointWriteFault(const ScopedCheckpointWriteFault&) = delete;
  ScopedCheckpointWriteFault& operator=(const ScopedCheckpointWriteFault&) = delete;

 private:
  std::int64_t previous_after_;
  int previous_errno_;
};

}  // namespace testing
}  // namespace volt

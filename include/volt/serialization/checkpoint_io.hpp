/// \file
/// Checkpoint files that survive crashes and report bad input clearly (volt::CheckpointError).
///
/// Format: a checkpoint is a file in torch.save's format (a zip archive holding a protocol-2 pickle and the
/// tensors' storages) laid out as Lightning's checkpoint dict (detail/checkpoint_layout.hpp), so Python reads
/// it with torch.load(path, weights_only=True) and its "state_dict" loads into the same model in PyTorch.
/// volt's parts save their state in LibTorch archives; the file holds those archives' contents as dicts.
/// volt reads the file with its own zip reader (every entry's CRC-32 checked) and restricted unpickler (no
/// code, no class other than dicts, lists, numbers, strings and tensors; every length bounds-checked), so no
/// LibTorch parser sees a byte of it. Checkpoints of volt's earlier format (a LibTorch archive) are still read,
/// with a deprecation warning; that format goes through LibTorch's reader.
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

#include <volt/core/linkage.hpp>
#include <volt/core/encoding.hpp>
#include <volt/core/files.hpp>
#include <volt/core/log.hpp>
#include <volt/serialization/detail/archive_tree.hpp>
#include <volt/serialization/detail/checkpoint_layout.hpp>
#include <volt/serialization/detail/inflate.hpp>
#include <volt/serialization/detail/model_match.hpp>
#include <volt/serialization/detail/torch_save.hpp>
#include <volt/serialization/detail/zip_reader.hpp>

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

VOLT_INLINE std::string system_error_text(int error);


/// Writes `bytes` to a new file at `path` and flushes it to disk (detail::write_file_durably, with the test
/// fault of ScopedCheckpointWriteFault). Throws CheckpointError (naming `shown` and the system error) on any
/// failure; the caller removes the partial file.
VOLT_INLINE void write_file_synced(const std::filesystem::path& path, const std::string& bytes, const std::string& shown);

/// Saves `archive` to `path` atomically (temporary file, fsync, rename, folder fsync). On failure the
/// previous file at `path` is untouched, the temporary file is removed, and CheckpointError names `path`
/// and the system error (e.g. "No space left on device"). Temporary files of `path` left by a killed
/// earlier write are removed first.
VOLT_INLINE void save_archive_atomically(torch::serialize::OutputArchive& archive, const std::filesystem::path& path);

/// CRC-32 of `size` bytes at `data` (zip entries).
VOLT_INLINE std::uint32_t crc32(const char* data, std::size_t size);

/// Checks the zip structure of a checkpoint and the CRC-32 of every entry (detail::read_zip_entries): LibTorch
/// verifies no checksum and its readers are not hardened against damaged input (a flipped byte in the
/// TorchScript code of an old-format archive crashes LibTorch 1.13). Deflated entries are inflated by volt's
/// own bounds-checked decoder (detail/inflate.hpp) and their CRC-32 checked too. Throws CheckpointError naming
/// `shown` and the damaged entry.
/// `names`, when given, receives the names of the entries checked.
VOLT_INLINE void check_zip_integrity(const std::string& bytes, const std::string& shown,
                                     std::vector<std::string>* names = nullptr);

/// Loads an archive from `bytes` (the content of the file `shown`), mapping every tensor to `device`: a
/// checkpoint in volt's format through volt's own readers, one in the earlier LibTorch-archive format through
/// LibTorch (with a deprecation warning, once per process). Throws CheckpointError saying what is wrong: empty,
/// not a zip archive (foreign file), truncated or corrupted, a weights file or a Lightning checkpoint (with
/// what to call instead), a newer format.
VOLT_INLINE void load_archive_bytes(torch::serialize::InputArchive& archive, const std::string& bytes,
                                    const std::string& shown, torch::Device device);

/// Loads an archive, mapping every tensor to `device`. Names the file in any error (see load_archive_bytes).
VOLT_INLINE void load_archive(torch::serialize::InputArchive& archive, const std::filesystem::path& path,
                              torch::Device device);

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
  bool contains(const std::string& key) const;

  /// The int entry `key`.
  std::int64_t read_int(const std::string& key) const { return read_value(key, &c10::IValue::isInt, "an integer").toInt(); }

  /// The bool entry `key`.
  bool read_bool(const std::string& key) const { return read_value(key, &c10::IValue::isBool, "a bool").toBool(); }

  /// The int list entry `key` (written as a c10::List<std::int64_t>).
  std::vector<std::int64_t> read_int_list(const std::string& key) const;

  /// The tensor entry `key`, written as a buffer (`archive.write(key, tensor, /*is_buffer=*/true)`), on the
  /// device the archive was loaded to.
  torch::Tensor read_tensor(const std::string& key) const;

  /// The nested archive `key` (an OutputArchive written into the checkpoint) into `into`.
  void read_archive(const std::string& key, torch::serialize::InputArchive& into) const;

  /// The nested archive `key` into `into` if the checkpoint has one: false (and `into` untouched) when the
  /// entry is missing or is not an archive, as InputArchive::try_read. For optional entries; never throws
  /// CheckpointError.
  bool try_read_archive(const std::string& key, torch::serialize::InputArchive& into) const;

  /// The archive read from.
  torch::serialize::InputArchive& archive() const noexcept { return archive_; }
  /// The file name shown in errors.
  const std::string& shown() const noexcept { return shown_; }

 private:
  c10::IValue read_value(const std::string& key, bool (c10::IValue::*has_type)() const, const char* type) const;

  CheckpointError entry_error(const std::string& key, const char* type) const;

  torch::serialize::InputArchive& archive_;
  std::string shown_;
};

}  // namespace detail

/// Loads only the model weights of a volt checkpoint (a full one or one saved with save_weights_only) into
/// `module`, mapping tensors to `device`. Call it on any rank, outside fit(). Throws CheckpointError naming the
/// file for a missing, truncated, corrupted or foreign file, and listing keys and shapes for another model.
VOLT_INLINE void load_checkpoint_weights(torch::nn::Module& module, const std::filesystem::path& path,
                                         torch::Device device = torch::kCPU);

namespace detail {

/// load_checkpoint_weights on the bytes of the file `shown` (loaded into `archive`, which the caller may read
/// further). Throws CheckpointError only.
VOLT_INLINE void load_weights_from_archive(torch::nn::Module& module, torch::serialize::InputArchive& archive,
                                           const std::string& shown);

}  // namespace detail

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
  ~ScopedCheckpointWriteFault();
  ScopedCheckpointWriteFault(const ScopedCheckpointWriteFault&) = delete;
  ScopedCheckpointWriteFault& operator=(const ScopedCheckpointWriteFault&) = delete;

 private:
  std::int64_t previous_after_;
  int previous_errno_;
};

}  // namespace testing
}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/serialization/impl/checkpoint_io.ipp>
#endif

/// \file
/// Durable file writes: write a file (from one buffer or several pieces) and flush it to disk, flush a
/// folder's entries to disk. The one place with the platform code for it (POSIX open/write/fsync; on Windows a
/// plain stream write without flushes).
/// Checkpoints (volt/serialization/checkpoint_io.hpp) and weights files (volt/serialization/weights.hpp)
/// write a temporary file with these, then rename it over the target.
#pragma once

#include <volt/core/linkage.hpp>
#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <ios>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#if !defined(_WIN32)
#include <fcntl.h>
#include <unistd.h>
#endif

namespace volt::detail {

/// The step of write_file_durably() that failed.
enum class FileWriteStage {
  create,  ///< the file could not be created or opened (POSIX open)
  write,   ///< a write failed part-way (FileWriteFailure::written says how far it got)
  flush,   ///< the data could not be flushed to disk (fsync)
  close,   ///< closing the file failed
  stream,  ///< the stream write of the Windows fallback failed (no system error is known)
};

/// Why write_file_durably() failed: the step, the system error (errno; 0 for FileWriteStage::stream) and the
/// bytes written before the failure.
struct FileWriteFailure {
  FileWriteStage stage = FileWriteStage::create;
  int error = 0;
  std::size_t written = 0;
};

/// A failure to inject in tests: the write fails with `error` once `after_bytes` bytes are written; a
/// negative `after_bytes` (the default) injects nothing. Honoured by the POSIX path only.
struct FileWriteFault {
  std::int64_t after_bytes = -1;
  int error = 0;
};

/// The name of a temporary file for writing `path` atomically: `.<name>.tmp<random>` in the same folder.
VOLT_INLINE bool is_temporary_of(const std::filesystem::path& candidate, const std::filesystem::path& target);

/// Removes the temporary files `.<name>.tmp<digits>` that an earlier write of `target` left when its process
/// was killed before the rename (only one process writes a given target; best effort, errors are ignored).
VOLT_INLINE void remove_stale_temporaries(const std::filesystem::path& target);

#if !defined(_WIN32)

/// Reads the whole file at `path` into `out`. Returns 0, or the system error (errno) of the open or read that
/// failed. Never throws (except std::bad_alloc).
inline int read_file_bytes(const std::filesystem::path& path, std::string& out) {
  out.clear();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  char buffer[1 << 16];
  for (;;) {
    const ::ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got < 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      ::close(fd);
      return error;
    }
    if (got == 0) break;
    out.append(buffer, static_cast<std::size_t>(got));
  }
  ::close(fd);
  return 0;
}

/// Writes the concatenation of `pieces` to a new file at `path` (created or truncated, mode 0644) and flushes
/// it to disk; a file too large to assemble in memory is written piece by piece. Returns std::nullopt on
/// success, else what failed (FileWriteFailure::written counts bytes over all pieces); the caller removes the
/// partial file. Never throws.
inline std::optional<FileWriteFailure> write_file_durably(const std::filesystem::path& path,
                                                          const std::vector<std::string_view>& pieces,
                                                          FileWriteFault fault = {}) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return FileWriteFailure{FileWriteStage::create, errno, 0};
  const auto fail = [fd](FileWriteStage stage, int error, std::size_t written) {
    ::close(fd);
    return FileWriteFailure{stage, error, written};
  };
  std::size_t written = 0;
  for (const std::string_view bytes : pieces) {
    std::size_t done = 0;
    while (done < bytes.size()) {
      std::size_t chunk = std::min<std::size_t>(bytes.size() - done, std::size_t{1} << 20);
      if (fault.after_bytes >= 0) {
        if (static_cast<std::int64_t>(written) >= fault.after_bytes) return fail(FileWriteStage::write, fault.error, written);
        chunk = std::min<std::size_t>(chunk, static_cast<std::size_t>(fault.after_bytes - static_cast<std::int64_t>(written)));
      }
      const ::ssize_t result = ::write(fd, bytes.data() + done, chunk);
      if (result < 0) {
        if (errno == EINTR) continue;
        return fail(FileWriteStage::write, errno, written);
      }
      done += static_cast<std::size_t>(result);
      written += static_cast<std::size_t>(result);
    }
  }
  if (::fsync(fd) != 0) return fail(FileWriteStage::flush, errno, written);
  if (::close(fd) != 0) return FileWriteFailure{FileWriteStage::close, errno, written};
  return std::nullopt;
}

/// Writes `bytes` to a new file at `path` (created or truncated, mode 0644) and flushes it to disk.
/// Returns std::nullopt on success, else what failed; the caller removes the partial file. Never throws.
inline std::optional<FileWriteFailure> write_file_durably(const std::filesystem::path& path, const std::string& bytes,
                                                          FileWriteFault fault = {}) {
  const std::string_view piece(bytes);
  return write_file_durably(path, std::vector<std::string_view>{piece}, fault);
}

/// Flushes the file at `path` (already written and closed) to disk. Best effort: a file that cannot be
/// opened or flushed is left as it is, silently.
inline void fsync_file(const std::filesystem::path& path) {
  if (const int fd = ::open(path.c_str(), O_RDONLY); fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

/// Flushes the entries of `folder` (a rename just done in it) to disk. Best effort: some file systems refuse
/// fsync on folders, and the rename itself is already done.
inline void fsync_folder(const std::filesystem::path& folder) {
  const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

#else

/// Writes the concatenation of `pieces` to a new file at `path` with a stream (no flush to disk on this
/// platform). Returns std::nullopt on success, else FileWriteStage::stream; the caller removes the partial
/// file. The fault is not honoured here.
inline std::optional<FileWriteFailure> write_file_durably(const std::filesystem::path& path,
                                                          const std::vector<std::string_view>& pieces,
                                                          FileWriteFault /*fault*/ = {}) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  for (const std::string_view bytes : pieces) out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.flush();
  if (!out) return FileWriteFailure{FileWriteStage::stream, 0, 0};
  return std::nullopt;
}

/// Writes `bytes` to a new file at `path` with a stream (no flush to disk on this platform). Returns
/// std::nullopt on success, else FileWriteStage::stream; the caller removes the partial file. The fault is
/// not honoured here.
inline std::optional<FileWriteFailure> write_file_durably(const std::filesystem::path& path, const std::string& bytes,
                                                          FileWriteFault fault = {}) {
  const std::string_view piece(bytes);
  return write_file_durably(path, std::vector<std::string_view>{piece}, fault);
}

/// Does nothing on this platform.
inline void fsync_file(const std::filesystem::path& /*path*/) {}

/// Does nothing on this platform.
inline void fsync_folder(const std::filesystem::path& /*folder*/) {}

/// Reads the whole file at `path` into `out`; returns 0, or EIO when the stream failed.
inline int read_file_bytes(const std::filesystem::path& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return errno != 0 ? errno : EIO;
  out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return in.bad() ? EIO : 0;
}

#endif

}  // namespace volt::detail

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/core/impl/files.ipp>
#endif

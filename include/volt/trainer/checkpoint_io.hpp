// Writing checkpoint files so that a crash never leaves a torn file: the archive is written to a temporary
// file in the same folder, flushed to disk, then renamed over the target, and the folder is flushed.
#pragma once

#include <torch/torch.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <string>
#include <system_error>

#if !defined(_WIN32)
#include <fcntl.h>
#include <unistd.h>
#endif

namespace volt {

/// A checkpoint file could not be written or read. Says which file and why.
class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {

inline void fsync_path([[maybe_unused]] const std::filesystem::path& path, [[maybe_unused]] bool directory) {
#if !defined(_WIN32)
  const int fd = ::open(path.c_str(), directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  if (fd < 0) return;
  const int result = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (result != 0 && !directory) {
    throw CheckpointError("volt: could not flush " + path.string() + " to disk: " + std::strerror(error));
  }
#endif
}

/// Saves `archive` to `path` atomically; on failure the previous file at `path` is untouched and the
/// temporary file is removed.
inline void save_archive_atomically(torch::serialize::OutputArchive& archive, const std::filesystem::path& path) {
  const auto folder = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  std::error_code error;
  std::filesystem::create_directories(folder, error);
  if (error) {
    throw CheckpointError("volt: cannot create the checkpoint folder " + folder.string() + ": " + error.message());
  }
  std::random_device entropy;
  const auto temporary = folder / ("." + path.filename().string() + ".tmp" + std::to_string(entropy()));
  try {
    archive.save_to(temporary.string());
    fsync_path(temporary, false);
    std::filesystem::rename(temporary, path);
  } catch (const std::exception& cause) {
    std::filesystem::remove(temporary, error);
    throw CheckpointError("volt: could not write the checkpoint " + path.string() + ": " + cause.what());
  }
  fsync_path(folder, true);
}

/// Loads an archive, mapping every tensor to `device`. Names the file in any error.
inline void load_archive(torch::serialize::InputArchive& archive, const std::filesystem::path& path,
                         torch::Device device) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) {
    throw CheckpointError("volt: checkpoint file " + path.string() + " does not exist or is not a file");
  }
  try {
    archive.load_from(path.string(), device);
  } catch (const std::exception& cause) {
    throw CheckpointError("volt: " + path.string() + " is not a readable checkpoint (truncated, corrupted or "
                          "not written by LibTorch): " + cause.what());
  }
}

}  // namespace detail
}  // namespace volt

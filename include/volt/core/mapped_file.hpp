/// \file
/// A whole file in memory for reading: memory-mapped where the platform allows it (POSIX mmap, private
/// copy-on-write pages: writes through the mapping change memory, never the file), else read into a buffer.
/// The one place with the platform code for it. safetensors loading (volt/serialization/safetensors.hpp)
/// builds tensors over it without copying.
#pragma once

#include <volt/core/linkage.hpp>
#include <cerrno>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <ios>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

#if !defined(_WIN32)
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

namespace volt::detail {

/// The bytes of one file, read-only to its owner and kept alive by std::shared_ptr (tensors built over it
/// hold one). Not copyable.
class MappedFile {
 public:
  /// Maps `path` (or, with `map` false or where mmap is not available, reads it into memory). Throws
  /// std::runtime_error naming the file and the system error when it cannot be opened, examined or mapped.
  static std::shared_ptr<MappedFile> open(const std::filesystem::path& path, bool map = true);

  /// Holds a copy of `bytes` (for tests and fuzzing: the same code path without a file).
  static std::shared_ptr<MappedFile> from_bytes(std::string bytes);

  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  /// The first byte (nullptr for an empty file). Writable: mapped pages are private copies on write.
  char* data() const { return data_; }
  /// The file's size in bytes.
  std::size_t size() const { return size_; }
  /// Whether the bytes are memory-mapped (false: read into memory).
  bool mapped() const { return mapping_ != nullptr; }

 private:
  MappedFile() = default;

  static std::runtime_error failure(const char* what, const std::filesystem::path& path, int error);

  void* mapping_ = nullptr;
  char* data_ = nullptr;
  std::size_t size_ = 0;
  std::string buffer_{};
};

}  // namespace volt::detail

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/core/impl/mapped_file.ipp>
#endif

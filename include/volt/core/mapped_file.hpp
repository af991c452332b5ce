/// \file
/// A whole file in memory for reading: memory-mapped where the platform allows it (POSIX mmap, private
/// copy-on-write pages: writes through the mapping change memory, never the file), else read into a buffer.
/// The one place with the platform code for it. safetensors loading (volt/serialization/safetensors.hpp)
/// builds tensors over it without copying.
#pragma once

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
  static std::shared_ptr<MappedFile> open(const std::filesystem::path& path, bool map = true) {
    auto file = std::shared_ptr<MappedFile>(new MappedFile());
#if !defined(_WIN32)
    if (map) {
      const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) throw failure("cannot open", path, errno);
      struct ::stat info {};
      if (::fstat(fd, &info) != 0) {
        const int error = errno;
        ::close(fd);
        throw failure("cannot examine", path, error);
      }
      if (!S_ISREG(info.st_mode)) {
        ::close(fd);
        throw std::runtime_error(path.string() + " is not a regular file");
      }
      file->size_ = static_cast<std::size_t>(info.st_size);
      if (file->size_ > 0) {
        void* address = ::mmap(nullptr, file->size_, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
        if (address == MAP_FAILED) {
          const int error = errno;
          ::close(fd);
          throw failure("cannot memory-map", path, error);
        }
        file->mapping_ = address;
        file->data_ = static_cast<char*>(address);
      }
      ::close(fd);  // the mapping stays valid without the descriptor
      return file;
    }
#else
    (void)map;
#endif
    std::ifstream in(path, std::ios::binary);
    if (!in) throw failure("cannot open", path, errno);
    file->buffer_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (in.bad()) throw failure("cannot read", path, errno);
    file->data_ = file->buffer_.data();
    file->size_ = file->buffer_.size();
    return file;
  }

  /// Holds a copy of `bytes` (for tests and fuzzing: the same code path without a file).
  static std::shared_ptr<MappedFile> from_bytes(std::string bytes) {
    auto file = std::shared_ptr<MappedFile>(new MappedFile());
    file->buffer_ = std::move(bytes);
    file->data_ = file->buffer_.data();
    file->size_ = file->buffer_.size();
    return file;
  }

  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile() {
#if !defined(_WIN32)
    if (mapping_ != nullptr) ::munmap(mapping_, size_);
#endif
  }

  /// The first byte (nullptr for an empty file). Writable: mapped pages are private copies on write.
  char* data() const { return data_; }
  /// The file's size in bytes.
  std::size_t size() const { return size_; }
  /// Whether the bytes are memory-mapped (false: read into memory).
  bool mapped() const { return mapping_ != nullptr; }

 private:
  MappedFile() = default;

  static std::runtime_error failure(const char* what, const std::filesystem::path& path, int error) {
    return std::runtime_error(std::string(what) + " " + path.string() + ": " + std::generic_category().message(error));
  }

  void* mapping_ = nullptr;
  char* data_ = nullptr;
  std::size_t size_ = 0;
  std::string buffer_{};
};

}  // namespace volt::detail

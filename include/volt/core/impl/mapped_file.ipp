/// \file
/// Definitions of the functions declared in volt/core/mapped_file.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE auto MappedFile::open(const std::filesystem::path& path, bool map) -> std::shared_ptr<MappedFile> {
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

VOLT_INLINE auto MappedFile::from_bytes(std::string bytes) -> std::shared_ptr<MappedFile> {
  auto file = std::shared_ptr<MappedFile>(new MappedFile());
  file->buffer_ = std::move(bytes);
  file->data_ = file->buffer_.data();
  file->size_ = file->buffer_.size();
  return file;
}

VOLT_INLINE MappedFile::~MappedFile() {
#if !defined(_WIN32)
  if (mapping_ != nullptr) ::munmap(mapping_, size_);
#endif
}

VOLT_INLINE auto MappedFile::failure(const char* what, const std::filesystem::path& path, int error) -> std::runtime_error {
  return std::runtime_error(std::string(what) + " " + path.string() + ": " + std::generic_category().message(error));
}

}  // namespace volt::detail

/// \file
/// Definitions of the functions declared in volt/loggers/logger.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

#include <random>

namespace volt::detail {

VOLT_INLINE std::string log_write_error(const std::filesystem::path& path, int error, const std::string& detail) {
  return "volt: could not write the log file " + path.string() + ": " +
         (error != 0 ? std::generic_category().message(error) : std::string("the write failed")) + detail +
         "; logs would be lost, so the run stops";
}

VOLT_INLINE void write_log_file_atomically(const std::filesystem::path& path, const std::string& text) {
  remove_stale_temporaries(path);
  const auto temporary = path.parent_path() / ("." + path.filename().string() + ".tmp" +
                                               std::to_string(std::random_device{}()));
  std::error_code ignored;
  if (const auto failure = write_file_durably(temporary, text)) {
    std::filesystem::remove(temporary, ignored);
    throw std::runtime_error(log_write_error(path, failure->error, " (after " + std::to_string(failure->written) +
                                                                       " of " + std::to_string(text.size()) + " bytes)"));
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) {
    std::filesystem::remove(temporary, ignored);
    throw std::runtime_error(log_write_error(path, error.value()));
  }
}

VOLT_INLINE void append_log_file(const std::filesystem::path& path, const std::string& text) {
  std::error_code error;
  const auto previous = std::filesystem::exists(path, error) ? std::filesystem::file_size(path, error) : 0;
  std::ofstream out(path, std::ios::binary | std::ios::app);
  errno = 0;
  if (out) out.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (out) out.flush();
  int seen = errno;
  out.close();
  if (out) return;
  if (seen == 0) seen = errno;
  std::filesystem::resize_file(path, previous, error);
  throw std::runtime_error(log_write_error(path, seen));
}

VOLT_INLINE int next_version(const std::filesystem::path& root) {
  std::error_code error;
  int next = 0;
  if (!std::filesystem::is_directory(root, error)) return 0;
  for (const auto& entry : std::filesystem::directory_iterator(root, error)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory() || name.rfind("version_", 0) != 0) continue;
    try {
      std::size_t used = 0;
      const int number = std::stoi(name.substr(8), &used);
      if (used == name.size() - 8) next = std::max(next, number + 1);
    } catch (const std::exception&) {
      // not a version folder of ours
    }
  }
  return next;
}

}  // namespace volt::detail

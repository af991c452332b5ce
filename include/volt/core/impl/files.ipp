/// \file
/// Definitions of the functions declared in volt/core/files.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE bool is_temporary_of(const std::filesystem::path& candidate, const std::filesystem::path& target) {
  const std::string prefix = "." + target.filename().string() + ".tmp";
  const std::string name = candidate.filename().string();
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return false;
  return std::all_of(name.begin() + static_cast<std::ptrdiff_t>(prefix.size()), name.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

VOLT_INLINE void remove_stale_temporaries(const std::filesystem::path& target) {
  const auto folder = target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  std::error_code error;
  std::vector<std::filesystem::path> stale;
  for (const auto& entry : std::filesystem::directory_iterator(folder, error)) {
    if (is_temporary_of(entry.path(), target)) stale.push_back(entry.path());
  }
  for (const auto& path : stale) std::filesystem::remove(path, error);
}

}  // namespace volt::detail

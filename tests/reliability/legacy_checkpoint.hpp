// Writes a checkpoint in volt's earlier format (a LibTorch archive, as volt wrote checkpoints before format 2),
// for the tests of the deprecated reading path.
#pragma once

#include "test_common.hpp"

#include <filesystem>
#include <map>
#include <string>

namespace volt_test {

/// Rewrites the checkpoint at `from` (volt's current format) as a LibTorch archive at `to`, with the
/// top-level keys in `renames` renamed (the earlier format named callbacks' entries by mangled type names).
inline void write_legacy_checkpoint(const std::filesystem::path& from, const std::filesystem::path& to,
                                    const std::map<std::string, std::string>& renames = {}) {
  torch::serialize::InputArchive current;
  volt::detail::load_archive(current, from, torch::kCPU);
  const auto tree = volt::detail::archive_tree(current);
  for (auto& [key, value] : std::get<volt::detail::pickle::Dict>(tree->data).items) {
    const auto found = renames.find(std::get<std::string>(key->data));
    if (found != renames.end()) key = volt::detail::pickle::make_value(found->second);
  }
  torch::serialize::OutputArchive old;
  volt::detail::write_archive_tree(*tree, old, to.string());
  old.save_to(to.string());
}

}  // namespace volt_test

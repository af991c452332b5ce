/// \file
/// Definitions of the functions declared in volt/trainer/datamodule.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE void merge_hparams(std::map<std::string, std::string>& params, const std::map<std::string, std::string>& extra) {
  std::vector<std::string> conflicts;
  for (const auto& [key, value] : extra) {
    const auto found = params.find(key);
    if (found != params.end() && found->second != value) conflicts.push_back("'" + key + "'");
  }
  if (!conflicts.empty()) {
    std::string keys;
    for (const auto& key : conflicts) keys += (keys.empty() ? "" : ", ") + key;
    throw std::runtime_error("Error while merging hparams: the keys [" + keys +
                             "] are present in both the LightningModule's and LightningDataModule's hparams but "
                             "have different values.");
  }
  for (const auto& [key, value] : extra) params.emplace(key, value);
}

}  // namespace volt::detail

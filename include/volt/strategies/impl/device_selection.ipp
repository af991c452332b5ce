/// \file
/// Definitions of the functions declared in volt/strategies/device_selection.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE std::string device_id_list(const DeviceSelection& selection) {
  std::string ids;
  for (int id : selection.device_ids) ids += (ids.empty() ? "" : ", ") + std::to_string(id);
  return ids;
}

}  // namespace volt::detail

/// \file
/// The file side of Fabric::save and Fabric::load: a FabricState (and the GradScaler's state) into one
/// archive and back; implementation of volt::Fabric, no public API.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/fabric/state.hpp>
#include <volt/precision/grad_scaler.hpp>
#include <volt/serialization/checkpoint_io.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <exception>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace volt::detail {

/// The key under which Fabric::save stores the GradScaler's state (Fabric::precision_state_key).
inline constexpr std::string_view fabric_precision_state_key = "volt.precision";

/// Fabric::save's write (on rank zero): every entry of `state` under its name, then `scaler`'s state when
/// there is a scaler, written atomically to `path`. Throws CheckpointError naming the file.
VOLT_INLINE void write_fabric_checkpoint(const std::filesystem::path& path, const FabricState& state,
                                         const GradScaler* scaler);

/// Fabric::load's read (on every rank): restores every entry of `state` from `path` in place, tensors mapped
/// to `device`, and `scaler`'s state when there is a scaler and the file has its state. Returns the names in
/// the file that `state` did not ask for. Throws as Fabric::load documents.
VOLT_INLINE std::vector<std::string> read_fabric_checkpoint(const std::filesystem::path& path, const FabricState& state,
                                                            bool strict, torch::Device device, GradScaler* scaler);

}  // namespace volt::detail

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/fabric/impl/checkpoint.ipp>
#endif

/// \file
/// Lightning's device parsers, applied to a DeviceSpec and a list of available ids.
///
/// parse_gpu_ids() is `_parse_gpu_ids` (spec 1.1) for CUDA and MPS; parse_cpu_cores() is
/// `_parse_cpu_cores` (spec 1.5). The accelerators call them with the machine's available ids; the
/// fuzzer in fuzz/ calls them directly. No LibTorch here.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/accelerators/device_spec.hpp>
#include <volt/core/errors.hpp>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace volt {

/// Most devices volt materialises from a count (devices=N): larger counts throw std::invalid_argument
/// instead of building a list of N ids (Python would try, and run out of memory).
inline constexpr int max_device_count = 1 << 16;

namespace detail {

/// Python's repr() of a list of ints: "[]", "[0, 1]".
VOLT_INLINE std::string python_list_repr(const std::vector<int>& ids);

VOLT_INLINE std::vector<int> id_range(int count);

/// Whether torchrun (TorchElastic) launched this process: TORCHELASTIC_RUN_ID is set, as
/// torch.distributed.is_torchelastic_launched() checks.
VOLT_INLINE bool torchelastic_launched();

/// Lightning's `_parse_gpu_ids(spec, include_cuda or include_mps)` with the accelerator's available ids.
/// Returns nullopt for "no devices" (0, "0", "[]", volt::devices({})); otherwise the requested ids in the
/// caller's order. Throws volt::MisconfigurationError "GPUs requested but none are available.",
/// "Device ID's (GPU) must be unique." or "You requested gpu: [...]\n But your machine only has: [...]";
/// std::invalid_argument for DeviceSpec{} ("auto" is resolved by the connector, as in Lightning, whose
/// parser raises int()'s ValueError for it) and for counts above volt::max_device_count.
VOLT_INLINE std::optional<std::vector<int>> parse_gpu_ids(const DeviceSpec& spec, const std::vector<int>& available_ids,
                                                          bool launched_by_torchelastic);

VOLT_INLINE std::optional<std::vector<int>> parse_gpu_ids(const DeviceSpec& spec, const std::vector<int>& available_ids);

inline constexpr std::string_view cpu_devices_message = "`devices` selected with `CPUAccelerator` should be an int > 0.";

/// Lightning's `_parse_cpu_cores`: an int > 0, or a string whose strip() is all digits and whose int()
/// is > 0. Returns the number of CPU processes. Throws std::invalid_argument (Python's TypeError)
/// "`devices` selected with `CPUAccelerator` should be an int > 0." for anything else (0, -1, "-1",
/// "+2", lists, "auto"), and int()'s ValueError text for digits wrapped in \x1c-\x1f.
VOLT_INLINE int parse_cpu_cores(const DeviceSpec& spec);

}  // namespace detail
}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/accelerators/impl/device_parser.ipp>
#endif

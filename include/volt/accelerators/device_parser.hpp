/// \file
/// Lightning's device parsers, applied to a DeviceSpec and a list of available ids.
///
/// parse_gpu_ids() is `_parse_gpu_ids` (spec 1.1) for CUDA and MPS; parse_cpu_cores() is
/// `_parse_cpu_cores` (spec 1.5). The accelerators call them with the machine's available ids; the
/// fuzzer in fuzz/ calls them directly. No LibTorch here.
#pragma once

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
inline std::string python_list_repr(const std::vector<int>& ids) {
  std::string out = "[";
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(ids[i]);
  }
  return out + "]";
}

inline std::vector<int> id_range(int count) {
  if (count > max_device_count) {
    throw std::invalid_argument("volt: devices=" + std::to_string(count) + " asks for more devices than volt supports (" +
                                std::to_string(max_device_count) + ")");
  }
  std::vector<int> ids;
  ids.reserve(static_cast<std::size_t>(std::max(count, 0)));
  for (int id = 0; id < count; ++id) ids.push_back(id);
  return ids;
}

/// Whether torchrun (TorchElastic) launched this process: TORCHELASTIC_RUN_ID is set, as
/// torch.distributed.is_torchelastic_launched() checks.
inline bool torchelastic_launched() { return std::getenv("TORCHELASTIC_RUN_ID") != nullptr; }

/// Lightning's `_parse_gpu_ids(spec, include_cuda or include_mps)` with the accelerator's available ids.
/// Returns nullopt for "no devices" (0, "0", "[]", volt::devices({})); otherwise the requested ids in the
/// caller's order. Throws volt::MisconfigurationError "GPUs requested but none are available.",
/// "Device ID's (GPU) must be unique." or "You requested gpu: [...]\n But your machine only has: [...]";
/// std::invalid_argument for DeviceSpec{} ("auto" is resolved by the connector, as in Lightning, whose
/// parser raises int()'s ValueError for it) and for counts above volt::max_device_count.
inline std::optional<std::vector<int>> parse_gpu_ids(const DeviceSpec& spec, const std::vector<int>& available_ids,
                                                     bool launched_by_torchelastic) {
  std::vector<int> requested;
  switch (spec.request()) {
    case DeviceRequest::automatic:
      throw std::invalid_argument(
          "invalid literal for int() with base 10: 'auto' (volt: DeviceSpec{} means \"auto\"; the connector "
          "replaces it with the accelerator's auto_device_count() before parsing)");
    case DeviceRequest::none: return std::nullopt;
    case DeviceRequest::all: requested = available_ids; break;
    case DeviceRequest::count: requested = id_range(spec.count()); break;
    case DeviceRequest::ids: {
      const DeviceIds ids = spec.ids();
      requested.assign(ids.begin(), ids.end());
      break;
    }
  }
  if (requested.empty()) throw MisconfigurationError("GPUs requested but none are available.");

  // Under torchrun each process usually sees one GPU: Lightning skips the checks below then.
  if (launched_by_torchelastic && requested.size() != 1 && available_ids.size() == 1) return requested;

  std::vector<int> sorted = requested;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    throw MisconfigurationError("Device ID's (GPU) must be unique.");
  }
  for (int id : requested) {
    if (std::find(available_ids.begin(), available_ids.end(), id) == available_ids.end()) {
      throw MisconfigurationError("You requested gpu: " + python_list_repr(requested) +
                                  "\n But your machine only has: " + python_list_repr(available_ids));
    }
  }
  return requested;
}

inline std::optional<std::vector<int>> parse_gpu_ids(const DeviceSpec& spec, const std::vector<int>& available_ids) {
  return parse_gpu_ids(spec, available_ids, torchelastic_launched());
}

inline constexpr std::string_view cpu_devices_message = "`devices` selected with `CPUAccelerator` should be an int > 0.";

/// Lightning's `_parse_cpu_cores`: an int > 0, or a string whose strip() is all digits and whose int()
/// is > 0. Returns the number of CPU processes. Throws std::invalid_argument (Python's TypeError)
/// "`devices` selected with `CPUAccelerator` should be an int > 0." for anything else (0, -1, "-1",
/// "+2", lists, "auto"), and int()'s ValueError text for digits wrapped in \x1c-\x1f.
inline int parse_cpu_cores(const DeviceSpec& spec) {
  int cores = 0;
  if (spec.form() == DeviceSpecForm::integer) {
    cores = spec.count();
  } else if (spec.form() == DeviceSpecForm::string && spec.text_is_digits()) {
    if (spec.cpu_int_rejects_text()) {
      throw std::invalid_argument("invalid literal for int() with base 10: " + detail::python_repr(spec.text()));
    }
    cores = spec.count();
  }
  if (cores <= 0) throw std::invalid_argument(std::string(cpu_devices_message));
  return cores;
}

}  // namespace detail
}  // namespace volt

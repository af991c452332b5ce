/// \file
/// Definitions of the functions declared in volt/accelerators/device_parser.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE std::string python_list_repr(const std::vector<int>& ids) {
  std::string out = "[";
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(ids[i]);
  }
  return out + "]";
}

VOLT_INLINE std::vector<int> id_range(int count) {
  if (count > max_device_count) {
    throw std::invalid_argument("volt: devices=" + std::to_string(count) + " asks for more devices than volt supports (" +
                                std::to_string(max_device_count) + ")");
  }
  std::vector<int> ids;
  ids.reserve(static_cast<std::size_t>(std::max(count, 0)));
  for (int id = 0; id < count; ++id) ids.push_back(id);
  return ids;
}

VOLT_INLINE bool torchelastic_launched() { return std::getenv("TORCHELASTIC_RUN_ID") != nullptr; }

VOLT_INLINE std::optional<std::vector<int>> parse_gpu_ids(const DeviceSpec& spec, const std::vector<int>& available_ids,
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

VOLT_INLINE std::optional<std::vector<int>> parse_gpu_ids(const DeviceSpec& spec, const std::vector<int>& available_ids) {
  return parse_gpu_ids(spec, available_ids, torchelastic_launched());
}

VOLT_INLINE int parse_cpu_cores(const DeviceSpec& spec) {
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

}  // namespace volt::detail

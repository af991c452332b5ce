/// \file
/// Definitions of the functions declared in volt/trainer/connectors/accelerator_connector.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE void set_torch_flags(const TrainerOptions& options) {
  if (options.seed) torch::manual_seed(*options.seed);
  set_math_modes(options.float32_matmul_precision, options.benchmark, options.deterministic);
}

VOLT_INLINE std::function<std::map<std::string, double>()> device_stats_probe(AcceleratorKind accelerator,
                                                                              torch::Device device) {
  return [accelerator, device] {
    return visit_accelerator(accelerator, [device](auto policy) { return decltype(policy)::get_device_stats(device); });
  };
}

}  // namespace volt::detail

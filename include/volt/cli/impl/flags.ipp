/// \file
/// Definitions of the functions declared in volt/cli/flags.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::cli {

VOLT_INLINE auto Args::trainer_options() const -> TrainerOptions {
  TrainerOptions options;
  options.devices = device_spec();
  options.num_nodes = num_nodes;
  options.max_epochs = max_epochs;
  options.max_steps = max_steps;
  options.max_time = max_time;
  options.accumulate_grad_batches = accumulate_grad_batches;
  options.default_root_dir = default_root_dir;
  options.seed = seed;
  options.cuda_graphs = cuda_graphs;
  options.deterministic = deterministic;
  options.benchmark = benchmark;
  options.float32_matmul_precision = float32_matmul_precision;
  options.overfit_batches = overfit_batches;
  options.reload_dataloaders_every_n_epochs = reload_dataloaders_every_n_epochs;
  return options;
}

VOLT_INLINE const std::string& Args::get(std::string_view flag) const {
  const auto found = values_.find(std::string(flag));
  if (found == values_.end()) throw std::out_of_range("volt::cli: no flag " + std::string(flag) + " was added");
  return found->second;
}

VOLT_INLINE std::int64_t Args::get_int(std::string_view flag) const {
  return detail::parse_number<std::int64_t>(flag, get(flag), "an integer");
}

}  // namespace volt::cli

namespace volt::cli::detail {

VOLT_INLINE BatchAmount parse_batch_amount(std::string_view flag, std::string_view text, std::string_view name) {
  const std::string what = "an int (a number of batches) or a float with a '.' (a fraction of the epoch)";
  if (text.find('.') == std::string_view::npos) {
    const auto count = parse_number<std::int64_t>(flag, text, what);
    if (count >= 0) return BatchAmount(count);
    throw UsageError("argument " + std::string(flag) + ": You have passed invalid value " + std::string(text) +
                     " for " + std::string(name) + ", it has to be in [0.0, 1.0] or an int.");
  }
  double fraction = 0;
  try {
    fraction = parse_real(flag, text);
  } catch (const UsageError&) {
    throw UsageError("argument " + std::string(flag) + ": expected " + what + ", got " + quoted(text));
  }
  if (fraction >= 0.0 && fraction <= 1.0) return BatchAmount(fraction);
  // Lightning: a whole float above 1 is a count ("3.0" -> 3).
  if (fraction > 1.0 && fraction < 9.2e18 && fraction == static_cast<double>(static_cast<std::int64_t>(fraction))) {
    return BatchAmount(static_cast<std::int64_t>(fraction));
  }
  throw UsageError("argument " + std::string(flag) + ": You have passed invalid value " + std::string(text) +
                   " for " + std::string(name) + ", it has to be in [0.0, 1.0] or an int.");
}

}  // namespace volt::cli::detail

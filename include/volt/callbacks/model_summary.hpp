/// \file
/// volt::ModelSummary: the table of a model's submodules and parameter counts printed at fit start.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/log.hpp>

#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

namespace volt {

/// Lightning's short parameter counts: 235146 -> "235 K", 1234 -> "1.2 K", 12 -> "12  ".
VOLT_INLINE std::string human_readable_count(std::int64_t number);

/// The module's C++ class name without namespaces and LibTorch's `Impl` suffix ("Sequential", "Linear").
VOLT_INLINE std::string module_type_name(const torch::nn::Module& module);

/// Callback: logs a table of the model's submodules (name, type, parameter count, mode) and the parameter totals
/// at fit start, on global rank zero (Lightning's ModelSummary).
class ModelSummary {
 public:
  /// max_depth 1 lists the model's direct submodules; -1 lists all, 0 prints only the totals.
  explicit ModelSummary(int max_depth = 1) : max_depth_(max_depth) {}

  /// Hook at fit start: logs summarize(model) through volt::log on global rank zero.
  template <class State>
  void on_fit_start(State& state) {
    if (state.is_global_zero && state.model != nullptr) log::info(summarize(*state.model));
  }

  /// The table as text, for `model` up to the depth given at construction. Does not print.
  std::string summarize(const torch::nn::Module& model) const;

 private:
  int max_depth_;
};

}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/callbacks/impl/model_summary.ipp>
#endif

/// \file
/// Definitions of the functions declared in volt/callbacks/stochastic_weight_averaging.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt {

VOLT_INLINE StochasticWeightAveraging::StochasticWeightAveraging(StochasticWeightAveragingOptions options)
    : options_(std::move(options)) {
  const auto& start = options_.swa_epoch_start;
  if ((start.is_fraction() && !(start.fraction() >= 0.0 && start.fraction() <= 1.0)) ||
      (!start.is_fraction() && start.epoch() < 1)) {
    throw MisconfigurationError("swa_epoch_start should be a >0 integer or a float between 0 and 1.");
  }
  bool positive = !options_.swa_lrs.empty();
  for (double lr : options_.swa_lrs) positive = positive && lr > 0.0;
  if (!positive) {
    throw MisconfigurationError("The `swa_lrs` should a positive float, or a list of positive floats");
  }
  optim::SWALR::check_strategy(options_.annealing_strategy);
  optim::SWALR::check_anneal_epochs(options_.annealing_epochs);
  if (!options_.avg_fn) options_.avg_fn = swa_average();
}

VOLT_INLINE void StochasticWeightAveraging::save_state(torch::serialize::OutputArchive& archive) const {
  average_.save(archive);
  archive.write("latest_update_epoch", c10::IValue(latest_update_epoch_));
  archive.write("swalr_start_epoch", c10::IValue(swalr_start_epoch_));
  archive.write("swalr_base_lrs", c10::IValue(c10::List<double>(swalr_base_lrs_)));
}

VOLT_INLINE void StochasticWeightAveraging::load_state(torch::serialize::InputArchive& archive) {
  average_ = {};
  const bool held = average_.load(archive);
  c10::IValue value;
  archive.read("latest_update_epoch", value);
  latest_update_epoch_ = value.toInt();
  archive.read("swalr_start_epoch", value);
  swalr_start_epoch_ = value.toInt();
  archive.read("swalr_base_lrs", value);
  swalr_base_lrs_ = value.toDoubleVector();
  pending_parameters_ = held;
  restored_ = true;
}

VOLT_INLINE bool StochasticWeightAveraging::is_batch_norm(torch::nn::Module& module) {
  return dynamic_cast<torch::nn::BatchNorm1dImpl*>(&module) != nullptr ||
         dynamic_cast<torch::nn::BatchNorm2dImpl*>(&module) != nullptr ||
         dynamic_cast<torch::nn::BatchNorm3dImpl*>(&module) != nullptr;
}

VOLT_INLINE std::string StochasticWeightAveraging::class_name(const torch::optim::LRScheduler& scheduler) {
  std::string name = c10::demangle(typeid(scheduler).name());
  if (const auto colon = name.rfind("::"); colon != std::string::npos) name = name.substr(colon + 2);
  return name;
}

}  // namespace volt

/// \file
/// Definitions of the functions declared in volt/optim/swalr.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::optim {

VOLT_INLINE SWALR::SWALR(torch::optim::Optimizer& optimizer, std::vector<double> swa_lrs, std::int64_t anneal_epochs,
                         const std::string& anneal_strategy)
    : Scheduler(optimizer), anneal_epochs_(anneal_epochs), cosine_(anneal_strategy == "cos") {
  if (swa_lrs.size() == 1) swa_lrs.resize(base_lrs().size(), swa_lrs.front());
  if (swa_lrs.size() != base_lrs().size()) {
    throw std::invalid_argument("swa_lr must have the same length as optimizer.param_groups. swa_lr has " +
                                std::to_string(swa_lrs.size()) + " values, param_groups has " +
                                std::to_string(base_lrs().size()) + ".");
  }
  check_strategy(anneal_strategy);
  check_anneal_epochs(anneal_epochs);
  swa_lrs_ = std::move(swa_lrs);
  initial_step();
}

VOLT_INLINE void SWALR::check_strategy(const std::string& anneal_strategy) {
  if (anneal_strategy != "cos" && anneal_strategy != "linear") {
    throw std::invalid_argument("anneal_strategy must by one of 'cos' or 'linear', instead got " + anneal_strategy);
  }
}

VOLT_INLINE void SWALR::check_anneal_epochs(std::int64_t anneal_epochs) {
  if (anneal_epochs < 0) {
    throw std::invalid_argument("anneal_epochs must be equal or greater than 0, got " + std::to_string(anneal_epochs));
  }
}

VOLT_INLINE auto SWALR::lrs_at(std::int64_t epoch) const -> std::vector<double> {
  const std::int64_t step = anneal_epochs_ == 0 ? std::max<std::int64_t>(1, epoch) : epoch;
  const double t = std::clamp(static_cast<double>(step) / static_cast<double>(std::max<std::int64_t>(1, anneal_epochs_)),
                              0.0, 1.0);
  const double alpha = cosine_ ? (1.0 - std::cos(std::numbers::pi * t)) / 2.0 : t;
  std::vector<double> lrs;
  for (std::size_t i = 0; i < base_lrs().size(); ++i) {
    lrs.push_back(alpha == 1.0 ? swa_lrs_[i] : swa_lrs_[i] * alpha + base_lrs()[i] * (1.0 - alpha));
  }
  return lrs;
}

VOLT_INLINE void SWALR::resume(std::vector<double> base_lrs, std::int64_t epoch) {
  check_per_group(base_lrs.size(), "base_lrs");
  restore(std::move(base_lrs), epoch);
}

}  // namespace volt::optim

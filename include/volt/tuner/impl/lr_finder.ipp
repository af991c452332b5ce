/// \file
/// Definitions of the functions declared in volt/tuner/lr_finder.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt {

VOLT_INLINE double lr_finder_learning_rate(const LRFinderOptions& options, std::int64_t step) {
  if (step <= 0) return options.min_lr;
  const double r = static_cast<double>(step + 1) / static_cast<double>(options.num_training);
  if (options.mode == "linear") return options.min_lr + r * (options.max_lr - options.min_lr);
  return options.min_lr * std::pow(options.max_lr / options.min_lr, r);
}

VOLT_INLINE void validate_lr_finder_options(const LRFinderOptions& options) {
  const auto bad = [](const std::string& what) { throw MisconfigurationError("volt: lr_find: " + what); };
  if (options.mode != "exponential" && options.mode != "linear") {
    bad("mode should be either `linear` or `exponential`; got `" + options.mode + "`");
  }
  if (options.num_training < 1) bad("num_training must be >= 1; got " + std::to_string(options.num_training));
  if (!std::isfinite(options.min_lr) || !std::isfinite(options.max_lr) || options.min_lr < 0 ||
      (options.mode == "exponential" && options.min_lr <= 0) || options.max_lr <= options.min_lr) {
    bad("needs finite 0 " + std::string(options.mode == "exponential" ? "< " : "<= ") +
        "min_lr < max_lr (mode `" + options.mode + "`); got min_lr=" + detail::svg_number(options.min_lr) +
        ", max_lr=" + detail::svg_number(options.max_lr));
  }
  if (options.early_stop_threshold && !(*options.early_stop_threshold > 0)) {
    bad("early_stop_threshold must be > 0 or std::nullopt (no early stop); got " +
        detail::svg_number(*options.early_stop_threshold));
  }
}
}  // namespace volt

namespace volt::detail {

VOLT_INLINE void restore_optimizer(LRFinderRun& run) {
  if (run.optimizer == nullptr) return;
  run.optimizer->state().clear();
  std::istringstream bytes(run.optimizer_state);
  torch::serialize::InputArchive archive;
  archive.load_from(bytes);
  run.optimizer->load(archive);
  auto& groups = run.optimizer->param_groups();
  for (std::size_t i = 0; i < groups.size() && i < run.group_options.size(); ++i) {
    groups[i].set_options(run.group_options[i]->clone());
  }
}
}  // namespace volt::detail

namespace volt {

VOLT_INLINE bool LRFinderLossSmoother::add(double loss, std::int64_t global_step) {
  avg_ = beta_ * avg_ + (1 - beta_) * loss;
  smoothed_ = avg_ / (1 - std::pow(beta_, static_cast<double>(global_step + 1)));
  const bool stop = threshold_ && global_step > 1 && smoothed_ > *threshold_ * best_;
  if (smoothed_ < best_ || global_step == 1) best_ = smoothed_;
  return stop;
}
}  // namespace volt

namespace volt::detail {

VOLT_INLINE ModuleSnapshot::ModuleSnapshot(torch::nn::Module& module)
    : module_(module) {
  torch::NoGradGuard no_grad;
  for (const auto& parameter : module.parameters()) parameters_.push_back(parameter.detach().clone());
  for (const auto& buffer : module.buffers()) buffers_.push_back(buffer.detach().clone());
}

VOLT_INLINE void ModuleSnapshot::restore() {
  torch::NoGradGuard no_grad;
  auto parameters = module_.parameters();
  auto buffers = module_.buffers();
  TORCH_CHECK(parameters.size() == parameters_.size() && buffers.size() == buffers_.size(),
              "volt: lr_find: the model's parameters or buffers changed in number during the sweep; cannot restore it");
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    parameters[i].copy_(parameters_[i]);
    parameters[i].mutable_grad() = torch::Tensor();
  }
  for (std::size_t i = 0; i < buffers_.size(); ++i) buffers[i].copy_(buffers_[i]);
}

}  // namespace volt::detail

/// \file
/// Definitions of the functions declared in volt/optim/plateau.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::optim {

VOLT_INLINE void ReduceLROnPlateau::step(double metric) {
  ++steps_;
  if (better(metric)) {
    best_ = metric;
    bad_steps_ = 0;
  } else {
    ++bad_steps_;
  }
  if (cooldown_counter_ > 0) {
    --cooldown_counter_;
    bad_steps_ = 0;
  }
  if (bad_steps_ > o_.patience) {
    auto& all = groups();
    for (auto& group : all) {
      const double old_lr = group.options().get_lr();
      const double new_lr = std::max(old_lr * o_.factor, o_.min_lr);
      if (old_lr - new_lr > o_.eps) group.options().set_lr(new_lr);
    }
    cooldown_counter_ = o_.cooldown;
    bad_steps_ = 0;
  }
}

VOLT_INLINE void ReduceLROnPlateau::save(torch::serialize::OutputArchive& archive) const {
  archive.write("best", c10::IValue(best_));
  archive.write("num_bad_epochs", c10::IValue(bad_steps_));
  archive.write("cooldown_counter", c10::IValue(cooldown_counter_));
  archive.write("last_epoch", c10::IValue(steps_));
  archive.write("lrs", c10::IValue(c10::List<double>(last_lrs())));
}

VOLT_INLINE void ReduceLROnPlateau::load(torch::serialize::InputArchive& archive) {
  c10::IValue value;
  archive.read("best", value);
  best_ = value.toDouble();
  archive.read("num_bad_epochs", value);
  bad_steps_ = value.toInt();
  archive.read("cooldown_counter", value);
  cooldown_counter_ = value.toInt();
  archive.read("last_epoch", value);
  steps_ = value.toInt();
  archive.read("lrs", value);
  std::vector<double> lrs;
  for (const auto& lr : value.toDoubleList()) lrs.push_back(lr);
  apply(lrs);
}

VOLT_INLINE auto ReduceLROnPlateau::get_lrs() -> std::vector<double> {
  throw std::logic_error("volt::optim::ReduceLROnPlateau steps with a metric: call step(metric) (with the Trainer, "
                         "name the metric in LRSchedulerConfig::monitor)");
}

VOLT_INLINE double ReduceLROnPlateau::worst() const {
  return o_.mode == "min" ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
}

VOLT_INLINE bool ReduceLROnPlateau::better(double a) const {
  const bool relative = o_.threshold_mode == "rel";
  if (o_.mode == "min") return relative ? a < best_ * (1.0 - o_.threshold) : a < best_ - o_.threshold;
  return relative ? a > best_ * (o_.threshold + 1.0) : a > best_ + o_.threshold;
}

}  // namespace volt::optim

namespace volt::optim {

VOLT_INLINE ReduceLROnPlateau::ReduceLROnPlateau(torch::optim::Optimizer& optimizer, ReduceLROnPlateauOptions options)
    : Scheduler(optimizer), o_(std::move(options)) {
  if (o_.factor >= 1.0) throw std::invalid_argument("Factor should be < 1.0.");
  if (o_.mode != "min" && o_.mode != "max") throw std::invalid_argument("mode " + o_.mode + " is unknown!");
  if (o_.threshold_mode != "rel" && o_.threshold_mode != "abs") {
    throw std::invalid_argument("threshold mode " + o_.threshold_mode + " is unknown!");
  }
  best_ = worst();
}

}  // namespace volt::optim

/// \file
/// Definitions of the functions declared in volt/callbacks/early_stopping.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt {

VOLT_INLINE EarlyStopping::EarlyStopping(EarlyStoppingOptions options)
    : options_(std::move(options)) {
  if (options_.mode != "min" && options_.mode != "max") {
    throw MisconfigurationError("`mode` can be min, max, got " + options_.mode);
  }
  if (options_.monitor.empty()) {
    throw MisconfigurationError("EarlyStopping needs a `monitor`: the name of a logged metric.");
  }
  if (options_.patience < 0) {
    throw MisconfigurationError("EarlyStopping(patience=" + std::to_string(options_.patience) +
                                ") must be >= 0.");
  }
  // Lightning flips min_delta's sign for "min" so that `current - min_delta` beats the best by min_delta.
  min_delta_ = options_.mode == "min" ? -std::abs(options_.min_delta) : std::abs(options_.min_delta);
  best_score_ = options_.mode == "min" ? std::numeric_limits<double>::infinity()
                                       : -std::numeric_limits<double>::infinity();
}

VOLT_INLINE void EarlyStopping::save_state(torch::serialize::OutputArchive& archive) const {
  archive.write("wait_count", c10::IValue(wait_count_));
  archive.write("stopped_epoch", c10::IValue(stopped_epoch_));
  archive.write("best_score", c10::IValue(best_score_));
  archive.write("patience", c10::IValue(options_.patience));
}

VOLT_INLINE void EarlyStopping::load_state(torch::serialize::InputArchive& archive) {
  c10::IValue value;
  archive.read("wait_count", value);
  wait_count_ = value.toInt();
  archive.read("stopped_epoch", value);
  stopped_epoch_ = value.toInt();
  archive.read("best_score", value);
  best_score_ = value.toDouble();
}

VOLT_INLINE bool EarlyStopping::improves(double current, double reference) const {
  return options_.mode == "min" ? current < reference : current > reference;
}

VOLT_INLINE std::string EarlyStopping::number(double value) {
  char buffer[48];
  std::snprintf(buffer, sizeof buffer, "%.3f", value);
  return buffer;
}

}  // namespace volt

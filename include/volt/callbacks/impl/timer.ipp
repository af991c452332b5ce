/// \file
/// Definitions of the functions declared in volt/callbacks/timer.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt {

VOLT_INLINE auto Timer::start_time(TimerStage stage) const -> std::optional<Clock::time_point> {
  return start_[index(stage)];
}

VOLT_INLINE double Timer::time_elapsed(TimerStage stage) const {
  const double offset = stage == TimerStage::train ? offset_ : 0.0;
  const auto& start = start_[index(stage)];
  if (!start) return offset;
  const auto end = end_[index(stage)].value_or(Clock::now());
  return std::chrono::duration<double>(end - *start).count() + offset;
}

VOLT_INLINE auto Timer::time_remaining(TimerStage stage) const -> std::optional<double> {
  if (!options_.duration) return std::nullopt;
  return options_.duration->seconds() - time_elapsed(stage);
}

VOLT_INLINE void Timer::save_state(torch::serialize::OutputArchive& archive) const {
  archive.write("time_elapsed/train", c10::IValue(time_elapsed(TimerStage::train)));
  archive.write("time_elapsed/validate", c10::IValue(time_elapsed(TimerStage::validate)));
  archive.write("time_elapsed/test", c10::IValue(time_elapsed(TimerStage::test)));
}

VOLT_INLINE void Timer::load_state(torch::serialize::InputArchive& archive) {
  c10::IValue value;
  archive.read("time_elapsed/train", value);
  offset_ = value.toDouble();
}

VOLT_INLINE void Timer::start(TimerStage stage) {
  start_[index(stage)] = Clock::now();
  end_[index(stage)].reset();
}

}  // namespace volt

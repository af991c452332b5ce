/// \file
/// Definitions of the functions declared in volt/core/log.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::log::detail {

VOLT_INLINE State& state() {
  static State s;
  return s;
}

VOLT_INLINE void default_sink(Level level, std::string_view message) {
  std::cerr << (level == Level::warning ? "volt: warning: " : "") << message << '\n';
}
}  // namespace volt::log::detail

namespace volt::log {

VOLT_INLINE Sink set_sink(Sink sink) {
  auto& s = detail::state();
  std::lock_guard lock(s.mutex);
  return std::exchange(s.sink, std::move(sink));
}

VOLT_INLINE void reset_sink() { set_sink(nullptr); }
}  // namespace volt::log

namespace volt::log::detail {

VOLT_INLINE std::atomic<int>& rank_override() {
  static std::atomic<int> rank{-1};
  return rank;
}
}  // namespace volt::log::detail

namespace volt::log {

VOLT_INLINE void set_global_rank(int rank) { detail::rank_override().store(rank); }

VOLT_INLINE int global_rank_from_environment() {
  if (const int rank = detail::rank_override().load(); rank >= 0) return rank;
  for (const char* name : {"RANK", "LOCAL_RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK"}) {
    if (const char* value = std::getenv(name); value != nullptr && *value != '\0') {
      return std::atoi(value);
    }
  }
  return 0;
}

VOLT_INLINE void message(Level level, std::string_view text) {
  auto& s = detail::state();
  std::lock_guard lock(s.mutex);
  if (s.sink) {
    s.sink(level, text);
  } else {
    detail::default_sink(level, text);
  }
}

VOLT_INLINE void info(std::string_view text) { message(Level::info, text); }

VOLT_INLINE void warn(std::string_view text) { message(Level::warning, text); }

VOLT_INLINE void info_rank_zero(std::string_view text) {
  if (global_rank_from_environment() == 0) info(text);
}

VOLT_INLINE void warn_rank_zero(std::string_view text) {
  if (global_rank_from_environment() == 0) warn(text);
}

VOLT_INLINE void warn_once(std::string_view text) {
  {
    auto& s = detail::state();
    std::lock_guard lock(s.mutex);
    if (!s.warned_once.emplace(text).second) return;
  }
  warn_rank_zero(text);
}

VOLT_INLINE void reset_warn_once() {
  auto& s = detail::state();
  std::lock_guard lock(s.mutex);
  s.warned_once.clear();
}

}  // namespace volt::log

/// \file
/// Rank-aware informational messages and warnings.
///
/// Everything volt prints goes through one sink (stderr by default) so tests can capture it and
/// applications can route it into their own logging. Like Lightning's rank_zero_info/rank_zero_warn,
/// the *_rank_zero functions print only in the process whose global rank is 0, read from the
/// environment the way Lightning reads it (RANK, LOCAL_RANK, SLURM_PROCID, JSM_NAMESPACE_RANK).
#pragma once

#include <atomic>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <utility>

/// Rank-aware messages and warnings, all through one replaceable sink.
namespace volt::log {

/// How a message is printed: the default sink prefixes warnings with "volt: warning: ".
enum class Level { info, warning };

/// Receives every message volt prints. Replace it with set_sink(); restore the default with reset_sink().
using Sink = std::function<void(Level, std::string_view)>;

namespace detail {
struct State {
  std::mutex mutex;
  Sink sink;
  std::set<std::string, std::less<>> warned_once;
};
inline State& state() {
  static State s;
  return s;
}
inline void default_sink(Level level, std::string_view message) {
  std::cerr << (level == Level::warning ? "volt: warning: " : "") << message << '\n';
}
}  // namespace detail

/// Installs `sink` for all later messages and returns the previous one (empty means the default).
inline Sink set_sink(Sink sink) {
  auto& s = detail::state();
  std::lock_guard lock(s.mutex);
  return std::exchange(s.sink, std::move(sink));
}
/// Restores the default sink (stderr) for all later messages.
inline void reset_sink() { set_sink(nullptr); }

namespace detail {
inline std::atomic<int>& rank_override() {
  static std::atomic<int> rank{-1};
  return rank;
}
}  // namespace detail

/// Sets the global rank the *_rank_zero functions use (a distributed strategy calls it once it knows the rank;
/// volt's own launcher never sets RANK, as Lightning's does not). A negative value returns to the environment.
inline void set_global_rank(int rank) { detail::rank_override().store(rank); }

/// The process's global rank: the one set with set_global_rank(), else as the launcher set it in the
/// environment, 0 when none did.
inline int global_rank_from_environment() {
  if (const int rank = detail::rank_override().load(); rank >= 0) return rank;
  for (const char* name : {"RANK", "LOCAL_RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK"}) {
    if (const char* value = std::getenv(name); value != nullptr && *value != '\0') {
      return std::atoi(value);
    }
  }
  return 0;
}

/// Hands `text` to the sink, in this process whatever its rank. Thread-safe: the sink is called under a lock,
/// so it must not log through volt itself.
inline void message(Level level, std::string_view text) {
  auto& s = detail::state();
  std::lock_guard lock(s.mutex);
  if (s.sink) {
    s.sink(level, text);
  } else {
    detail::default_sink(level, text);
  }
}

/// An informational message, printed by every rank.
inline void info(std::string_view text) { message(Level::info, text); }
/// A warning, printed by every rank.
inline void warn(std::string_view text) { message(Level::warning, text); }

/// An informational message printed only where global_rank_from_environment() is 0.
inline void info_rank_zero(std::string_view text) {
  if (global_rank_from_environment() == 0) info(text);
}
/// A warning printed only where global_rank_from_environment() is 0 (Lightning's rank_zero_warn).
inline void warn_rank_zero(std::string_view text) {
  if (global_rank_from_environment() == 0) warn(text);
}

/// Warns the first time `text` is seen in this process (Python's default warning filter).
inline void warn_once(std::string_view text) {
  {
    auto& s = detail::state();
    std::lock_guard lock(s.mutex);
    if (!s.warned_once.emplace(text).second) return;
  }
  warn_rank_zero(text);
}

/// Forgets which warnings were already printed (for tests).
inline void reset_warn_once() {
  auto& s = detail::state();
  std::lock_guard lock(s.mutex);
  s.warned_once.clear();
}

}  // namespace volt::log

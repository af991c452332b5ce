/// \file
/// Rank-aware informational messages and warnings.
///
/// Everything volt prints goes through one sink (stderr by default) so tests can capture it and
/// applications can route it into their own logging. Like Lightning's rank_zero_info/rank_zero_warn,
/// the *_rank_zero functions print only in the process whose global rank is 0, read from the
/// environment the way Lightning reads it (RANK, LOCAL_RANK, SLURM_PROCID, JSM_NAMESPACE_RANK).
#pragma once

#include <volt/core/linkage.hpp>
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
VOLT_INLINE State& state();
VOLT_INLINE void default_sink(Level level, std::string_view message);
}  // namespace detail

/// Installs `sink` for all later messages and returns the previous one (empty means the default).
VOLT_INLINE Sink set_sink(Sink sink);
/// Restores the default sink (stderr) for all later messages.
VOLT_INLINE void reset_sink();

namespace detail {
VOLT_INLINE std::atomic<int>& rank_override();
}  // namespace detail

/// Sets the global rank the *_rank_zero functions use (a distributed strategy calls it once it knows the rank;
/// volt's own launcher never sets RANK, as Lightning's does not). A negative value returns to the environment.
VOLT_INLINE void set_global_rank(int rank);

/// The process's global rank: the one set with set_global_rank(), else as the launcher set it in the
/// environment, 0 when none did.
VOLT_INLINE int global_rank_from_environment();

/// Hands `text` to the sink, in this process whatever its rank. Thread-safe: the sink is called under a lock,
/// so it must not log through volt itself.
VOLT_INLINE void message(Level level, std::string_view text);

/// An informational message, printed by every rank.
VOLT_INLINE void info(std::string_view text);
/// A warning, printed by every rank.
VOLT_INLINE void warn(std::string_view text);

/// An informational message printed only where global_rank_from_environment() is 0.
VOLT_INLINE void info_rank_zero(std::string_view text);
/// A warning printed only where global_rank_from_environment() is 0 (Lightning's rank_zero_warn).
VOLT_INLINE void warn_rank_zero(std::string_view text);

/// Warns the first time `text` is seen in this process (Python's default warning filter).
VOLT_INLINE void warn_once(std::string_view text);

/// Forgets which warnings were already printed (for tests).
VOLT_INLINE void reset_warn_once();

}  // namespace volt::log

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/core/impl/log.ipp>
#endif

/// \file
/// volt's process launcher (Lightning's _SubprocessScriptLauncher); implementation, no public API.
///
/// The process a user starts becomes local rank 0 and re-executes the same binary, with the same arguments,
/// for local ranks 1..n-1.
///
/// Contract, as Lightning's: before starting the children the launcher sets MASTER_ADDR, MASTER_PORT (a free port
/// unless given), NODE_RANK and WORLD_SIZE in its own environment; each child gets the same environment plus
/// `LOCAL_RANK=<i>`. RANK is never set. A child dies with its parent (PR_SET_PDEATHSIG). A watcher thread in the
/// parent notices a child that exits with a failure while the run goes on: it prints which local rank failed and
/// how, terminates the other children and exits the parent with status 1, so no rank waits forever on a dead peer.
/// When the parent process ends, it waits for the children and exits non-zero if any of them failed.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/log.hpp>

#include <signal.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

/// POSIX's environment of this process, which the launcher copies into each child's.
extern char** environ;  // NOLINT: POSIX

namespace volt::detail {

/// Describes how a child ended, e.g. "exited with status 3" or "was killed by signal 9 (Killed)".
VOLT_INLINE std::string describe_wait_status(int status);

/// This process's command line (argv[0..]) as the kernel recorded it.
VOLT_INLINE std::vector<std::string> own_command_line();

class SubprocessLauncher {
 public:
  struct Child {
    int local_rank;
    pid_t pid;
    bool done = false;
    int status = 0;
  };

  /// The process-wide launcher (children are started at most once per process).
  static SubprocessLauncher& instance();

  bool launched() const { return !children_.empty(); }

  /// Starts local ranks 1..num_processes-1 as copies of this program. Call in local rank 0 only, after the
  /// rendezvous variables are in this process's environment. Throws std::runtime_error if a child cannot start.
  void launch(int num_processes);

  /// Waits for every child to exit; returns a description of each failure (empty when all exited with 0).
  std::vector<std::string> wait_all();

  /// Terminates the children that are still running (SIGTERM, then SIGKILL after `grace`).
  void terminate_children(std::chrono::milliseconds grace = std::chrono::milliseconds(2000));

  ~SubprocessLauncher();

  SubprocessLauncher(const SubprocessLauncher&) = delete;
  SubprocessLauncher& operator=(const SubprocessLauncher&) = delete;

 private:
  SubprocessLauncher() = default;

  static std::string describe(const Child& child);

  void stop_watching();

  void terminate_locked(std::chrono::milliseconds grace);

  void watch();

  std::mutex mutex_;
  std::vector<Child> children_;
  std::thread watcher_;
  std::atomic<bool> stop_{false};
};

}  // namespace volt::detail

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/distributed/impl/launcher.ipp>
#endif

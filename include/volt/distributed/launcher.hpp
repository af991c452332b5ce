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
inline std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int signal = WTERMSIG(status);
    const char* name = ::strsignal(signal);
    return "was killed by signal " + std::to_string(signal) + (name != nullptr ? std::string(" (") + name + ")" : "");
  }
  return "ended with wait status " + std::to_string(status);
}

/// This process's command line (argv[0..]) as the kernel recorded it.
inline std::vector<std::string> own_command_line() {
  std::ifstream file("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  std::string current;
  for (char c : all) {
    if (c == '\0') {
      args.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  if (!current.empty()) args.push_back(current);
  return args;
}

class SubprocessLauncher {
 public:
  struct Child {
    int local_rank;
    pid_t pid;
    bool done = false;
    int status = 0;
  };

  /// The process-wide launcher (children are started at most once per process).
  static SubprocessLauncher& instance() {
    static SubprocessLauncher launcher;
    return launcher;
  }

  bool launched() const { return !children_.empty(); }

  /// Starts local ranks 1..num_processes-1 as copies of this program. Call in local rank 0 only, after the
  /// rendezvous variables are in this process's environment. Throws std::runtime_error if a child cannot start.
  void launch(int num_processes) {
    if (launched() || num_processes <= 1) return;
    const auto args = own_command_line();
    if (args.empty()) throw std::runtime_error("volt: cannot read /proc/self/cmdline to relaunch this program");
    char executable[4096];
    const ssize_t length = ::readlink("/proc/self/exe", executable, sizeof(executable) - 1);
    if (length <= 0) throw std::runtime_error("volt: cannot resolve /proc/self/exe to relaunch this program");
    executable[length] = '\0';
    for (int local_rank = 1; local_rank < num_processes; ++local_rank) {
      // Everything the child needs is prepared before fork(): after it only async-signal-safe calls are made.
      std::vector<std::string> environment;
      for (char** entry = environ; *entry != nullptr; ++entry) {
        if (std::strncmp(*entry, "LOCAL_RANK=", 11) != 0) environment.emplace_back(*entry);
      }
      environment.push_back("LOCAL_RANK=" + std::to_string(local_rank));
      std::vector<char*> envp, argv;
      for (auto& entry : environment) envp.push_back(entry.data());
      envp.push_back(nullptr);
      std::vector<std::string> arg_copy = args;
      for (auto& arg : arg_copy) argv.push_back(arg.data());
      argv.push_back(nullptr);
      const pid_t parent = ::getpid();
      const pid_t pid = ::fork();
      if (pid < 0) throw std::runtime_error("volt: fork() failed while launching local rank " + std::to_string(local_rank));
      if (pid == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) ::_exit(1);
        ::execve(executable, argv.data(), envp.data());
        ::_exit(127);
      }
      std::lock_guard lock(mutex_);
      children_.push_back({local_rank, pid});
    }
    watcher_ = std::thread([this] { watch(); });
  }

  /// Waits for every child to exit; returns a description of each failure (empty when all exited with 0).
  std::vector<std::string> wait_all() {
    stop_watching();
    std::vector<std::string> failures;
    std::lock_guard lock(mutex_);
    for (auto& child : children_) {
      if (!child.done) {
        int status = 0;
        if (::waitpid(child.pid, &status, 0) == child.pid) {
          child.done = true;
          child.status = status;
        }
      }
      if (child.done && child.status != 0) failures.push_back(describe(child));
    }
    return failures;
  }

  /// Terminates the children that are still running (SIGTERM, then SIGKILL after `grace`).
  void terminate_children(std::chrono::milliseconds grace = std::chrono::milliseconds(2000)) {
    std::lock_guard lock(mutex_);
    terminate_locked(grace);
  }

  ~SubprocessLauncher() {
    if (children_.empty()) return;
    const auto failures = wait_all();
    if (!failures.empty()) {
      for (const auto& failure : failures) log::info(failure);
      std::_Exit(1);
    }
  }

  SubprocessLauncher(const SubprocessLauncher&) = delete;
  SubprocessLauncher& operator=(const SubprocessLauncher&) = delete;

 private:
  SubprocessLauncher() = default;

  static std::string describe(const Child& child) {
    return "volt: DDP local rank " + std::to_string(child.local_rank) + " (pid " + std::to_string(child.pid) + ") " +
           describe_wait_status(child.status);
  }

  void stop_watching() {
    stop_.store(true);
    if (watcher_.joinable()) watcher_.join();
  }

  void terminate_locked(std::chrono::milliseconds grace) {
    for (auto& child : children_) {
      if (!child.done) ::kill(child.pid, SIGTERM);
    }
    const auto deadline = std::chrono::steady_clock::now() + grace;
    for (auto& child : children_) {
      while (!child.done) {
        int status = 0;
        const pid_t result = ::waitpid(child.pid, &status, WNOHANG);
        if (result == child.pid || result < 0) {
          child.done = true;
          child.status = status;
          break;
        }
        if (std::chrono::steady_clock::now() > deadline) {
          ::kill(child.pid, SIGKILL);
          ::waitpid(child.pid, &status, 0);
          child.done = true;
          child.status = status;
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  }

  void watch() {
    while (!stop_.load()) {
      {
        std::lock_guard lock(mutex_);
        for (auto& child : children_) {
          if (child.done) continue;
          int status = 0;
          if (::waitpid(child.pid, &status, WNOHANG) == child.pid) {
            child.done = true;
            child.status = status;
            if (status != 0) {
              log::info(describe(child) + "; terminating the other processes of this run.");
              terminate_locked(std::chrono::milliseconds(2000));
              log::info("volt: DDP run failed because local rank " + std::to_string(child.local_rank) +
                        " failed; exiting local rank 0 with status 1.");
              std::_Exit(1);
            }
          }
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  std::mutex mutex_;
  std::vector<Child> children_;
  std::thread watcher_;
  std::atomic<bool> stop_{false};
};

}  // namespace volt::detail

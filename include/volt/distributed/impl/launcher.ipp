/// \file
/// Definitions of the functions declared in volt/distributed/launcher.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int signal = WTERMSIG(status);
    const char* name = ::strsignal(signal);
    return "was killed by signal " + std::to_string(signal) + (name != nullptr ? std::string(" (") + name + ")" : "");
  }
  return "ended with wait status " + std::to_string(status);
}

VOLT_INLINE std::vector<std::string> own_command_line() {
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

VOLT_INLINE auto SubprocessLauncher::instance() -> SubprocessLauncher& {
  static SubprocessLauncher launcher;
  return launcher;
}

VOLT_INLINE void SubprocessLauncher::launch(int num_processes) {
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

VOLT_INLINE auto SubprocessLauncher::wait_all() -> std::vector<std::string> {
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

VOLT_INLINE void SubprocessLauncher::terminate_children(std::chrono::milliseconds grace) {
  std::lock_guard lock(mutex_);
  terminate_locked(grace);
}

VOLT_INLINE SubprocessLauncher::~SubprocessLauncher() {
  if (children_.empty()) return;
  const auto failures = wait_all();
  if (!failures.empty()) {
    for (const auto& failure : failures) log::info(failure);
    std::_Exit(1);
  }
}

VOLT_INLINE std::string SubprocessLauncher::describe(const Child& child) {
  return "volt: DDP local rank " + std::to_string(child.local_rank) + " (pid " + std::to_string(child.pid) + ") " +
         describe_wait_status(child.status);
}

VOLT_INLINE void SubprocessLauncher::stop_watching() {
  stop_.store(true);
  if (watcher_.joinable()) watcher_.join();
}

VOLT_INLINE void SubprocessLauncher::terminate_locked(std::chrono::milliseconds grace) {
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

VOLT_INLINE void SubprocessLauncher::watch() {
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

}  // namespace volt::detail

/// \file
/// Definitions of the functions declared in volt/distributed/heartbeat.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

#ifdef VOLT_DETAIL_HAS_C10D

namespace volt::detail {

VOLT_INLINE Heartbeat::Heartbeat(std::string host, std::uint16_t port, int rank) {
  thread_ = std::thread([this, host = std::move(host), port, rank] { run(host, port, rank); });
}

VOLT_INLINE Heartbeat::~Heartbeat() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

VOLT_INLINE std::vector<int> Heartbeat::silent_ranks(c10d::Store& store, int size, int self,
                                                  std::chrono::milliseconds window) {
  const auto read = [&] {
    std::map<int, std::vector<std::uint8_t>> beats;
    for (int rank = 0; rank < size; ++rank) {
      if (rank != self && store.check({key(rank)})) beats[rank] = store.get(key(rank));
    }
    return beats;
  };
  const auto before = read();
  std::this_thread::sleep_for(window);
  const auto after = read();
  std::vector<int> silent;
  for (int rank = 0; rank < size; ++rank) {
    if (rank == self) continue;
    const auto was = before.find(rank), is = after.find(rank);
    if (was == before.end() || is == after.end() || was->second == is->second) silent.push_back(rank);
  }
  return silent;
}

VOLT_INLINE std::string Heartbeat::lost_ranks(c10d::Store& store, int size, int self) noexcept {
  try {
    const auto silent = silent_ranks(store, size, self, std::chrono::seconds(2));
    store.set("volt/checked/" + std::to_string(self), std::vector<std::uint8_t>{1});
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    for (int r = 0; self == 0 && r < size; ++r) {
      while (std::find(silent.begin(), silent.end(), r) == silent.end() &&
             !store.check({"volt/checked/" + std::to_string(r)}) && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    if (silent.empty()) return {};
    std::string names;
    for (std::size_t i = 0; i < silent.size(); ++i) names += (i > 0 ? ", " : "") + std::to_string(silent[i]);
    const bool one = silent.size() == 1;
    return (one ? "rank " : "ranks ") + names + " of " + std::to_string(size) + (one ? " is" : " are") +
           " gone: " + (one ? "its" : "their") + " heartbeat in the rendezvous store stopped (killed, exited, or " +
           "on a host that cannot be reached)";
  } catch (...) {
    return "the rendezvous store on rank 0's host cannot be reached: rank 0 (or its host) is lost";
  }
}

VOLT_INLINE void Heartbeat::run(const std::string& host, std::uint16_t port, int rank) noexcept {
  try {
    c10d::TCPStoreOptions options;
    options.port = port;
    options.isServer = false;
    options.waitWorkers = false;
    options.timeout = std::chrono::seconds(10);
    c10d::TCPStore store(host, options);
    std::uint64_t count = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_) {
      const std::string text = std::to_string(++count);
      lock.unlock();
      store.set(key(rank), std::vector<std::uint8_t>(text.begin(), text.end()));
      lock.lock();
      wake_.wait_for(lock, std::chrono::milliseconds(250), [this] { return stop_; });
    }
  } catch (...) {
    // The store is gone (rank 0 ended) or cannot be reached: nothing left to tell.
  }
}

}  // namespace volt::detail

#endif

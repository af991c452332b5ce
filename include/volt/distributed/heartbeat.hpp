/// \file
/// volt::detail::Heartbeat: each rank's sign of life in the rendezvous store, so that after a failed collective
/// the surviving ranks can name the ranks that are gone (their beats stop) rather than those only slow to fail.
#pragma once

#include <volt/core/compat.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#ifdef VOLT_DETAIL_HAS_C10D
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace volt::detail {

/// A thread that writes a counter to the key "volt/beat/<rank>" of the rendezvous store every 250 ms, through a
/// connection of its own (the collectives' thread keeps the group's). It ends quietly when the store goes away
/// (rank 0's process ended) and is stopped and joined by the destructor.
class Heartbeat {
 public:
  /// The key of `rank`'s beat.
  static std::string key(int rank) { return "volt/beat/" + std::to_string(rank); }

  /// Starts beating for `rank` into the store at `host`:`port` (hosted by rank 0).
  Heartbeat(std::string host, std::uint16_t port, int rank) {
    thread_ = std::thread([this, host = std::move(host), port, rank] { run(host, port, rank); });
  }
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;
  ~Heartbeat() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  /// The ranks of [0, size), other than `self`, whose beat did not change during `window` (or that never beat),
  /// read through `store`. Throws what the store throws when it cannot be reached.
  static std::vector<int> silent_ranks(c10d::Store& store, int size, int self, std::chrono::milliseconds window) {
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

  /// After a failed collective, e.g. "ranks 2, 3 of 4 are gone: their heartbeat ... stopped ...": the ranks
  /// whose heartbeat stopped, watched for 2 s (empty when every rank still beats). Rank 0, which hosts the
  /// store, then waits up to 3 s until the other survivors have looked too. Never throws: a store that cannot
  /// be reached means rank 0 (or its host) is lost, and says so.
  static std::string lost_ranks(c10d::Store& store, int size, int self) noexcept {
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

 private:
  void run(const std::string& host, std::uint16_t port, int rank) noexcept {
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

  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace volt::detail

#endif

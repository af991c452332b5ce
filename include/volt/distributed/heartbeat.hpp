/// \file
/// volt::detail::Heartbeat: each rank's sign of life in the rendezvous store, so that after a failed collective
/// the surviving ranks can name the ranks that are gone (their beats stop) rather than those only slow to fail.
#pragma once

#include <volt/core/compat.hpp>
#include <volt/core/linkage.hpp>

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
  Heartbeat(std::string host, std::uint16_t port, int rank);
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;
  ~Heartbeat();

  /// The ranks of [0, size), other than `self`, whose beat did not change during `window` (or that never beat),
  /// read through `store`. Throws what the store throws when it cannot be reached.
  static std::vector<int> silent_ranks(c10d::Store& store, int size, int self, std::chrono::milliseconds window);

  /// After a failed collective, e.g. "ranks 2, 3 of 4 are gone: their heartbeat ... stopped ...": the ranks
  /// whose heartbeat stopped, watched for 2 s (empty when every rank still beats). Rank 0, which hosts the
  /// store, then waits up to 3 s until the other survivors have looked too. Never throws: a store that cannot
  /// be reached means rank 0 (or its host) is lost, and says so.
  static std::string lost_ranks(c10d::Store& store, int size, int self) noexcept;

 private:
  void run(const std::string& host, std::uint16_t port, int rank) noexcept;

  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace volt::detail

#endif

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/distributed/impl/heartbeat.ipp>
#endif

/// \file
/// The rendezvous of a distributed run: every rank connects to the TCPStore that global rank 0 hosts and checks
/// in; while it waits, each rank says whom it waits for, where, and until when, repeated, so a rank that never
/// comes is seen at once rather than after the whole timeout.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/compat.hpp>
#include <volt/core/log.hpp>
#include <volt/distributed/environment.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <ctime>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#ifdef VOLT_DETAIL_HAS_C10D
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#endif

namespace volt::detail {

/// How often a rank waiting at the rendezvous repeats whom it waits for: a fifth of the timeout, between 1 s
/// and 30 s.
VOLT_INLINE std::chrono::milliseconds rendezvous_report_interval(std::chrono::milliseconds timeout);

/// "2026-12-01 21:55:03 UTC".
VOLT_INLINE std::string utc_time_text(std::chrono::system_clock::time_point when);

/// Calls `report()` every `interval` on a thread of its own until destroyed. The reports keep their pace while
/// the owner is blocked in a call that can outlast an interval, as a TCPStore connection attempt can (its own
/// retries and back-off are not bounded by the timeout it is given on every LibTorch version).
class PeriodicReport {
 public:
  PeriodicReport(std::chrono::milliseconds interval, std::function<void()> report)
      : thread_([this, interval, report = std::move(report)] {
          std::unique_lock<std::mutex> lock(mutex_);
          auto next = std::chrono::steady_clock::now() + interval;
          while (!wake_.wait_until(lock, next, [this] { return stopped_; })) {
            report();
            next += interval;
          }
        }) {}
  PeriodicReport(const PeriodicReport&) = delete;
  PeriodicReport& operator=(const PeriodicReport&) = delete;
  ~PeriodicReport() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopped_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopped_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

#ifdef VOLT_DETAIL_HAS_C10D

/// "rank 1", "ranks 1, 3" (at most 16 listed): the ranks that have not checked in at the rendezvous.
inline std::string missing_ranks(c10d::Store& store, int size) {
  std::vector<int> missing;
  for (int rank = 0; rank < size; ++rank) {
    if (!store.check({"volt/joined/" + std::to_string(rank)})) missing.push_back(rank);
  }
  if (missing.empty()) return "no rank";
  std::string text = missing.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < missing.size() && i < 16; ++i) text += (i ? ", " : "") + std::to_string(missing[i]);
  if (missing.size() > 16) text += " and " + std::to_string(missing.size() - 16) + " more";
  return text;
}

/// Connects to (rank 0: hosts) the store of `environment` with `options` and waits until every rank checked
/// in, warning every rendezvous_report_interval(timeout) whom it waits for, where and until when. Calls
/// `fail(why)`, which throws, when `timeout` passes first; other errors propagate.
template <class Fail>
c10::intrusive_ptr<c10d::TCPStore> join_rendezvous(const ClusterEnvironment& environment, c10d::TCPStoreOptions options,
                                                   std::chrono::milliseconds timeout, Fail&& fail) {
  const int rank = environment.global_rank;
  const int size = environment.world_size;
  const std::string where = environment.main_address + ":" + std::to_string(environment.main_port);
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + timeout;
  const auto interval = rendezvous_report_interval(timeout);
  const std::string until = ", until " + utc_time_text(std::chrono::system_clock::now() + timeout) + " (timeout " +
                            std::to_string(timeout.count() / 1000) + " s)";
  const std::string self = "volt: rank " + std::to_string(rank) + " of " + std::to_string(size);
  options.waitWorkers = false;  // the loop below waits, saying whom it waits for
  c10::intrusive_ptr<c10d::TCPStore> store;
  if (options.isServer) {
    options.timeout = timeout;
    store = c10::make_intrusive<c10d::TCPStore>(environment.main_address, options);
  } else {
    // Connect in slices of at most `interval` (a refused connection returns at once: then retry after 100 ms)
    // until rank 0's store answers, while a reporter says every `interval` whom this rank waits for.
    const PeriodicReport report(interval, [&] {
      log::warn(self + " is waiting for rank 0 to host the rendezvous at " + where + until);
    });
    for (;;) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      options.timeout = std::max(std::chrono::milliseconds(1), std::min(interval, left));
      try {
        store = c10::make_intrusive<c10d::TCPStore>(environment.main_address, options);
        break;
      } catch (const std::exception& error) {
        if (std::chrono::steady_clock::now() >= deadline) {
          const auto* c10_error = dynamic_cast<const c10::Error*>(&error);
          fail("rank 0, which hosts the rendezvous, never answered (" +
               std::string(c10_error ? c10_error->what_without_backtrace() : error.what()) + ")");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
    store->setTimeout(timeout);
  }
  // Every rank checks in and waits for the others, so a missing rank is reported here, by name, rather than
  // by whichever backend call happens to time out first.
  store->set("volt/joined/" + std::to_string(rank), std::vector<std::uint8_t>{1});
  store->add("volt/joined", 1);
  auto next_report = std::chrono::steady_clock::now() + interval;
  for (std::int64_t joined = store->add("volt/joined", 0); joined < size; joined = store->add("volt/joined", 0)) {
    const auto now = std::chrono::steady_clock::now();
    if (now > deadline) {
      fail(std::to_string(joined) + " of " + std::to_string(size) + " processes joined; missing: " +
                    missing_ranks(*store, size));
    }
    if (now >= next_report) {
      log::warn(self + " is waiting at " + where + " for " + missing_ranks(*store, size) + " (" +
                std::to_string(joined) + " of " + std::to_string(size) + " joined)" + until);
      next_report += interval;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return store;
}

#endif

}  // namespace volt::detail

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/distributed/impl/rendezvous.ipp>
#endif

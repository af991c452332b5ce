/// \file
/// volt::SimpleProfiler: the wall time of every action the Trainer runs, reported as Lightning's
/// SimpleProfiler reports it ("FIT Profiler Report", one row per action). See docs/profiling.md.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/profilers/profiler.hpp>

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace volt {

/// Options of volt::SimpleProfiler (Lightning's SimpleProfiler arguments).
struct SimpleProfilerOptions {
  /// Folder of the report file; empty: the Trainer's log_dir (when `filename` is set).
  std::filesystem::path dirpath{};
  /// Base name of the report file (`<stage>-<filename>.txt`); empty: the report is printed.
  std::string filename{};
  /// Add the columns "Num calls" and "Percentage %" (of the time since the profiler was made), and the Total
  /// row; false: the action, its mean and its total, sorted by mean.
  bool extended = true;
};

/// Records the duration of every action with a steady clock and reports, per action, the mean duration, the
/// number of calls, the total and its share of the time since construction, sorted by that share (Lightning's
/// layout, to the character).
class SimpleProfiler final : public Profiler {
 public:
  /// A profiler with `options`.
  explicit SimpleProfiler(SimpleProfilerOptions options = {});

  /// Starts `action`; throws std::invalid_argument when it is already running.
  void start(std::string_view action) override;
  /// Stops `action`; throws std::invalid_argument when it was not started.
  void stop(std::string_view action) override;
  /// The report (Lightning's SimpleProfiler.summary; "" when nothing was recorded).
  std::string summary() override;

  /// The recorded durations of `action`, in seconds (empty when it never ran).
  std::vector<double> durations(std::string_view action) const;
  /// Every action recorded, in the order of their first call.
  std::vector<std::string> actions() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Record {
    std::string action;
    std::vector<double> durations;
  };
  bool extended_;
  Clock::time_point created_ = Clock::now();
  std::map<std::string, Clock::time_point, std::less<>> running_;
  std::vector<Record> records_;
  std::map<std::string, std::size_t, std::less<>> index_;
};

}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/profilers/impl/simple_profiler.ipp>
#endif

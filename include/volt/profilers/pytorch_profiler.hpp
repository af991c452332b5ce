/// \file
/// volt::PyTorchProfiler: LibTorch's operator profiler over a schedule of steps, with a Chrome trace per
/// recorded window and a table of the top operators (Lightning's PyTorchProfiler). See docs/profiling.md.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/compat.hpp>
#include <volt/profilers/profiler.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace volt {

/// Which steps are recorded (torch.profiler.schedule): `wait` steps not profiled, `warmup` steps with the
/// profiler prepared but not recording, `active` steps recorded (one trace per window); the cycle repeats
/// `repeat` times (0: until the stage ends). Lightning's default is {1, 1, 3}.
struct ProfilerSchedule {
  std::int64_t wait = 1;    ///< Steps skipped at the start of each cycle.
  std::int64_t warmup = 1;  ///< Steps with the profiler prepared, not recording (their events are dropped).
  std::int64_t active = 3;  ///< Steps recorded; >= 1.
  std::int64_t repeat = 0;  ///< Cycles; 0: as many as the stage has steps for.
};

/// Options of volt::PyTorchProfiler (Lightning's PyTorchProfiler arguments).
struct PyTorchProfilerOptions {
  /// Folder of the traces and of the report file; empty: the Trainer's log_dir.
  std::filesystem::path dirpath{};
  /// Base name of the report and trace files; empty: the report is printed.
  std::string filename{};
  /// Which steps are recorded.
  ProfilerSchedule schedule{};
  /// Write a Chrome trace (`<stage>-<filename>-<step action>.<window>.pt.trace.json`) per recorded window.
  bool export_to_chrome = true;
  /// Record the input shapes of each operator (the trace's "Input Dims").
  bool record_shapes = false;
  /// Record the memory allocated and freed by each operator.
  bool profile_memory = false;
  /// The column the table is sorted by: "cpu_time_total" (default), "cpu_time", "cuda_time_total",
  /// "cuda_time" or "count".
  std::string sort_by_key = "cpu_time_total";
  /// Rows of the table; -1: all.
  std::int64_t row_limit = 20;
};

/// Records LibTorch's operators (aten::addmm, autograd's backward functions, the CUDA kernels when the
/// profiler has Kineto and the run is on CUDA) in the active steps of the schedule. A step ends when an action
/// whose name ends with the stage's step function stops ("...training_step" in fit, "...validation_step" in
/// validate, ...). The Trainer's other actions appear in the trace as user annotations.
class PyTorchProfiler final : public Profiler {
 public:
  /// A profiler with `options`; throws std::invalid_argument for an unknown sort_by_key or a schedule with
  /// active < 1 or a negative count.
  explicit PyTorchProfiler(PyTorchProfilerOptions options = {});
  ~PyTorchProfiler() override;

  /// While recording: opens `action` as a LibTorch user scope (it shows in the trace).
  void start(std::string_view action) override;
  /// Closes `action`'s scope; an action ending with the stage's step function ends a step of the schedule
  /// (the window that ends with it is written).
  void stop(std::string_view action) override;
  /// "<STAGE> Profiler Report" and the top-operators table ("" when nothing was recorded).
  std::string summary() override;
  /// Starts the schedule for `stage` at step 0 (see Profiler::setup).
  void setup(std::string_view stage, std::optional<int> local_rank, const std::filesystem::path& log_dir) override;
  /// Writes the window still recording, if any, and stops LibTorch's profiler.
  void teardown() override;

  /// The Chrome traces written so far.
  const std::vector<std::filesystem::path>& traces() const { return traces_; }

  /// One row of the table: an operator's calls and times over every recorded window.
  struct OperatorStats {
    std::int64_t count = 0;            ///< Calls.
    double cpu_time_total_us = 0;      ///< Time on the host, microseconds.
    double device_time_total_us = 0;   ///< Time of its device events (CUDA kernels), microseconds.
  };
  /// The operators recorded so far, by name.
  const std::map<std::string, OperatorStats, std::less<>>& operators() const { return operators_; }

 private:
  enum class Phase { none, warmup, record };
  Phase phase(std::int64_t step) const;
  std::int64_t cycle(std::int64_t step) const;
  void enter(std::int64_t step);
  void finish_window(std::string_view action);
  /// Ends a trace that was prepared (warm-up) and never recorded: LibTorch's profiler only stops a running
  /// trace, so it is started and stopped at once and its events dropped (what torch.profiler does when it stops
  /// in the warm-up). With Kineto and CUDA a prepared trace left behind makes the next prepareProfiler fail.
  void discard_prepared();
  void step(std::string_view action);

  PyTorchProfilerOptions options_;
  std::string step_function_;
  std::int64_t step_ = 0;
  bool prepared_ = false;
  bool recording_ = false;
  int windows_ = 0;
  std::vector<std::filesystem::path> traces_;
  std::map<std::string, OperatorStats, std::less<>> operators_;
  struct Annotations;
  std::unique_ptr<Annotations> annotations_;
};

}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/profilers/impl/pytorch_profiler.ipp>
#endif

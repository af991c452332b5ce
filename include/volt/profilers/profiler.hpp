/// \file
/// volt::Profiler: the interface the Trainer times its actions through (Lightning's profilers/profiler.py),
/// and volt::ProfileScope, which times one action. See docs/profiling.md.
///
/// The Trainer starts and stops a named action around every hook it calls ("[LightningModule]Net.on_fit_start",
/// "[Callback]ModelCheckpoint.on_train_epoch_end") and around the loops' steps ("run_training_epoch",
/// "run_training_batch", "[_TrainingEpochLoop].train_dataloader_next", ...). Without a profiler it only tests a
/// null pointer.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/log.hpp>

#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <typeinfo>
#include <exception>

namespace volt {

/// What every profiler has: where its report goes (`dirpath`, `filename`), the stage it profiles, and the
/// describe / teardown calls of Lightning's Profiler. A derived profiler implements start, stop and summary.
///
/// The report of a stage goes to `<dirpath>/<stage>-<filename>[-<local rank>].txt` (appended), when `filename`
/// is set; with `filename` set and `dirpath` empty, `dirpath` is the Trainer's log_dir. Without a filename it
/// is printed (rank zero only).
class Profiler {
 public:
  /// `dirpath` and `filename` as above (empty: unset).
  explicit Profiler(std::filesystem::path dirpath = {}, std::string filename = {})
      : dirpath_(std::move(dirpath)), filename_(std::move(filename)) {}
  virtual ~Profiler() = default;
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  /// Starts timing `action`.
  virtual void start(std::string_view action) = 0;
  /// Stops timing `action`.
  virtual void stop(std::string_view action) = 0;
  /// The report of what was recorded ("" when there is nothing to say).
  virtual std::string summary() = 0;

  /// Called by the Trainer before a stage runs: the stage's name ("fit", "validate", "test", "predict"), the
  /// local rank when more than one process runs (nullopt otherwise) and the Trainer's log_dir (used when no
  /// dirpath was given).
  virtual void setup(std::string_view stage, std::optional<int> local_rank, const std::filesystem::path& log_dir);
  /// Writes summary() to the report file or prints it, then calls teardown (Lightning's describe).
  virtual void describe();
  /// Closes the report file.
  virtual void teardown();

  /// The stage set by setup ("" before).
  const std::string& stage() const { return stage_; }
  /// The folder of the report files (after setup: the log_dir when none was given).
  const std::filesystem::path& dirpath() const { return dirpath_; }
  /// The report's base name (empty: the report is printed).
  const std::string& filename() const { return filename_; }
  /// The local rank given to setup (nullopt for one process).
  std::optional<int> local_rank() const { return local_rank_; }

  /// The file name of a report for `action` (empty: the stage's report) with `extension`: the stage, the
  /// filename, the local rank and the action joined with "-" (Lightning's `_prepare_filename`); characters that
  /// are not safe in file names become `_`.
  std::string prepare_filename(std::string_view action = {}, std::string_view extension = ".txt") const;

 protected:
  /// Writes `text` to the stage's report file when a filename is set (creating dirpath), else prints it on
  /// rank zero. Throws std::runtime_error naming the file when it cannot be written.
  void write_report(std::string_view text);

 private:
  std::filesystem::path dirpath_;
  std::string filename_;
  std::string stage_;
  std::optional<int> local_rank_;
  std::ofstream output_;
};

/// Times `action` on `profiler` from construction to destruction (Lightning's `with profiler.profile(name)`);
/// does nothing when `profiler` is null.
class ProfileScope {
 public:
  /// Starts `action` when `profiler` is not null.
  ProfileScope(Profiler* profiler, std::string action);
  /// Stops the action; an error of the profiler is logged as a warning (a destructor cannot throw).
  ~ProfileScope();
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  Profiler* profiler_;
  std::string action_;
};

namespace detail {

/// The name a type is reported under: its demangled name without its namespaces, as Python's `__class__.__name__`
/// ("Net", "ModelCheckpoint", "EMA<float>").
VOLT_INLINE std::string profiled_type_name(const char* mangled);

/// Python's format(value, ".5"): five significant digits, exponent notation below 1e-4 and from 1e5, ".0" added
/// to a whole number in fixed notation ("0.0024", "7.2208e-05", "2.0").
VOLT_INLINE std::string python_g5(double value);

/// "[LightningModule]<M>.<what>": the action of model hook or step `what` of a model of type M.
template <class M>
std::string model_action(std::string_view what) {
  static const std::string prefix = "[LightningModule]" + profiled_type_name(typeid(M).name()) + ".";
  return prefix + std::string(what);
}

/// Sets `profiler` (may be null) up for `stage` and describes it when the stage ends, however it ends (an
/// error writing the report is logged, not thrown, so that it does not hide the stage's own error).
class ProfiledStage {
 public:
  /// Calls profiler->setup(stage, local_rank, log_dir) when `profiler` is not null.
  ProfiledStage(Profiler* profiler, std::string_view stage, std::optional<int> local_rank,
                const std::filesystem::path& log_dir);
  /// Calls profiler->describe().
  ~ProfiledStage();
  ProfiledStage(const ProfiledStage&) = delete;
  ProfiledStage& operator=(const ProfiledStage&) = delete;

 private:
  Profiler* profiler_;
};

}  // namespace detail
}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/profilers/impl/profiler.ipp>
#endif

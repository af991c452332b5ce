/// \file
/// volt::Logger: the interface of experiment loggers (Lightning's Logger), and where their files go.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/files.hpp>

#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>

namespace volt {

/// What ModelCheckpoint tells the loggers after it saves (Lightning passes the callback itself to
/// Logger.after_save_checkpoint; these are the members its loggers read).
struct SavedCheckpoints {
  /// The last checkpoint written (`last.ckpt`; empty when save_last is off).
  std::filesystem::path last_model_path{};
  /// The monitored value of the latest top-k check (nullopt without a monitor).
  std::optional<double> current_score{};
  /// The best checkpoint so far.
  std::filesystem::path best_model_path{};
  /// The monitored value of best_model_path (nullopt without a monitor).
  std::optional<double> best_model_score{};
  /// The kept top-k checkpoints and their monitored values.
  std::map<std::filesystem::path, double> best_k_models{};
  /// The callback's monitor (its options are what Lightning's MLFlowLogger records with each checkpoint).
  std::string monitor{};
  /// Its mode, "min" or "max".
  std::string mode{};
  /// Its save_last option.
  bool save_last = false;
  /// Its save_top_k option.
  int save_top_k = 1;
  /// Its save_weights_only option.
  bool save_weights_only = false;
  /// Its every_n_train_steps interval (0: none).
  std::int64_t every_n_train_steps = 0;
};

/// An experiment logger. The Trainer calls it on global rank zero only: log_metrics every
/// log_every_n_steps optimizer steps and at epoch ends, log_hyperparams once at fit start, save after
/// each write batch, finalize once when the run ends ("success", "failed" or "interrupted").
class Logger {
 public:
  virtual ~Logger() = default;
  /// Records `metrics` at optimizer step `step`. May buffer; may throw std::runtime_error when a file cannot
  /// be written.
  virtual void log_metrics(const std::map<std::string, double>& metrics, std::int64_t step) = 0;
  /// Records the run's hyperparameters, once, at fit start.
  virtual void log_hyperparams(const std::map<std::string, std::string>& params) = 0;
  /// Writes what is buffered. The default does nothing.
  virtual void save() {}
  /// Called once when the run ends, with "success", "failed" or "interrupted"; the default calls save().
  virtual void finalize(const std::string& /*status*/) { save(); }
  /// The folder of this run's files (also where ModelCheckpoint puts checkpoints/ by default).
  virtual std::filesystem::path log_dir() const = 0;
  /// The Trainer's default_root_dir, given before the first write: loggers that write files use it when they
  /// were given no folder of their own (CSVLogger and TensorBoardLogger without a save_dir). The default
  /// ignores it.
  virtual void set_default_save_dir(const std::filesystem::path& /*dir*/) {}
  /// Called by ModelCheckpoint on global rank zero after it saved a checkpoint (Lightning's
  /// after_save_checkpoint). The default does nothing; MLFlowLogger uploads checkpoints (log_model).
  virtual void after_save_checkpoint(const SavedCheckpoints& /*checkpoints*/) {}
};

namespace detail {

/// "<what> <path>: <reason>" for a failed log write; `error` is the errno seen (0: unknown).
VOLT_INLINE std::string log_write_error(const std::filesystem::path& path, int error, const std::string& detail = {});

/// Writes `text` as the whole content of `path` atomically (temporary file in the same folder, flushed, then
/// renamed over `path`): a full disk leaves the previous file as it was. Throws std::runtime_error naming the
/// file and the system error.
VOLT_INLINE void write_log_file_atomically(const std::filesystem::path& path, const std::string& text);

/// Appends `text` to `path`. On failure the file is cut back to its previous size (no torn row) and
/// std::runtime_error names the file and the system error.
VOLT_INLINE void append_log_file(const std::filesystem::path& path, const std::string& text);

/// Lightning's version numbering: the next free `version_N` under `root` (0 when none exists).
VOLT_INLINE int next_version(const std::filesystem::path& root);

/// The file loggers' folder rule (Lightning's): `save_dir / name / version_N`, save_dir "." when empty, N the
/// options' version or else the next free one, chosen once (`version` caches it).
template <class Options>
std::filesystem::path versioned_log_dir(const Options& options, std::optional<int>& version) {
  const auto root = (options.save_dir.empty() ? std::filesystem::path(".") : options.save_dir) / options.name;
  if (!version) version = options.version ? *options.version : next_version(root);
  return root / ("version_" + std::to_string(*version));
}

/// The Trainer's default_root_dir as the save_dir of a file logger that was given none ("." when empty too).
template <class Options>
void adopt_default_save_dir(Options& options, const std::filesystem::path& dir) {
  if (options.save_dir.empty()) options.save_dir = dir.empty() ? std::filesystem::path(".") : dir;
}

}  // namespace detail
}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/loggers/impl/logger.ipp>
#endif

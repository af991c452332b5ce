/// \file
/// volt::ModelCheckpointOptions: the options of volt::ModelCheckpoint (Lightning's ModelCheckpoint arguments)
/// and Lightning's checks of them.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/duration.hpp>
#include <volt/core/errors.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace volt {

// Field order lets the common options read naturally with designated initializers:
// `volt::ModelCheckpoint{{.monitor = "val_acc", .mode = "max", .save_top_k = 3}}`.
/// The options of volt::ModelCheckpoint (Lightning's ModelCheckpoint arguments).
struct ModelCheckpointOptions {
  /// Folder of the checkpoints; empty: `<logger log_dir>/checkpoints`, or `<default_root_dir>/checkpoints`.
  std::filesystem::path dirpath{};
  /// File name pattern without extension; `{epoch}`, `{step}` and logged metric names, with an optional
  /// printf-style format after a colon (`{val_loss:.2f}`). Empty: "{epoch}-{step}".
  std::string filename{};
  /// Metric to rank checkpoints by; empty: keep the latest.
  std::string monitor{};
  /// "min": lower monitored values are better; "max": higher. Anything else makes the constructor throw.
  std::string mode = "min";
  /// Keep the best k checkpoints (-1: all, 0: none).
  int save_top_k = 1;
  /// Also write `last.ckpt` whenever a checkpoint is saved.
  bool save_last = false;
  /// Save every N optimizer steps (0: off).
  std::optional<std::int64_t> every_n_train_steps{};
  /// Save every N epochs (default 1 when no interval is given).
  std::optional<std::int64_t> every_n_epochs{};
  /// Save at the first batch end this long after the last save or the start of training
  /// (`std::chrono::minutes(30)`, "00:00:30:00"); excludes the two other intervals.
  std::optional<Duration> train_time_interval{};
  /// Save only the model's weights, not the optimizer, callbacks and loop state.
  bool save_weights_only = false;
  /// Log each save on global rank zero ("Epoch 0, global step 100: saving model to ...").
  bool verbose = false;
  /// Write `{epoch}` as `epoch=3`.
  bool auto_insert_metric_name = true;
  /// Save at the end of the training epoch (true) or of validation (false); nullopt decides as Lightning does.
  std::optional<bool> save_on_train_epoch_end{};
  /// Add `-v1`, `-v2`... instead of overwriting an existing file of the same name.
  bool enable_version_counter = true;
  /// Also write the model's weights to `<dirpath>/best.safetensors` whenever the best checkpoint changes (rank
  /// zero; metadata "format" "pt", "checkpoint", "epoch", "step", and "monitor", "score" with a monitor). A
  /// failed export is a warning; training goes on. Not in Lightning.
  bool export_safetensors = false;
};

namespace detail {

/// The save intervals ModelCheckpoint runs with, after Lightning's defaults.
struct CheckpointIntervals {
  std::int64_t every_n_train_steps = 0;  ///< 0: off
  std::int64_t every_n_epochs = 0;       ///< 0: off
};

/// Lightning's checks of ModelCheckpoint's arguments, and the intervals they give. Throws MisconfigurationError
/// for save_top_k < -1, a negative interval, more than one of the intervals, a mode other than "min"/"max", or
/// save_top_k above 1 without a monitor.
VOLT_INLINE CheckpointIntervals check_model_checkpoint_options(const ModelCheckpointOptions& o);

}  // namespace detail
}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/callbacks/impl/model_checkpoint_options.ipp>
#endif

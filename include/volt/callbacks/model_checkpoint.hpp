/// \file
/// volt::ModelCheckpoint: save checkpoints periodically and keep the best k by a monitored metric
/// (Lightning's ModelCheckpoint; file names like `epoch=0-step=100.ckpt`).
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/callbacks/detail/checkpoint_resume.hpp>
#include <volt/callbacks/detail/time_trigger.hpp>
#include <volt/callbacks/model_checkpoint_options.hpp>
#include <volt/core/duration.hpp>
#include <volt/core/errors.hpp>
#include <volt/core/log.hpp>
#include <volt/loggers/logger.hpp>
#include <volt/serialization/safetensors.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

namespace volt {

/// Callback: saves checkpoints while fitting, every N steps, N epochs or a time interval, keeps the best
/// `save_top_k` by the monitored metric and optionally `last.ckpt` (Lightning's ModelCheckpoint). It runs on
/// every rank and calls the Trainer's save on each; only global rank zero deletes the files it replaces.
/// Nothing is saved while not fitting, under fast_dev_run, or twice for the same global step. Its bookkeeping
/// (best paths and scores, its folder) is saved in checkpoints; a fit resumed into another folder restores only
/// best_model_path and warns (Lightning's rule), so nothing of the earlier run's folder is deleted.
class ModelCheckpoint {
 public:
  /// Extension of every checkpoint file.
  static constexpr const char* file_extension = ".ckpt";
  /// File name (without extension) of the last checkpoint, when save_last is on.
  static constexpr const char* name_last = "last";
  /// File name of the best weights, when export_safetensors is on.
  static constexpr const char* name_best_safetensors = "best.safetensors";

  /// Checks the options as Lightning does. Throws MisconfigurationError for save_top_k < -1, a negative
  /// interval, two intervals set, a mode other than "min"/"max", or save_top_k above 1 without a monitor.
  explicit ModelCheckpoint(ModelCheckpointOptions options = {});
  /// Copies the options and the bookkeeping (best and top-k paths, scores, the last path).
  ModelCheckpoint(const ModelCheckpoint&);
  /// Moves the options and the bookkeeping.
  ModelCheckpoint(ModelCheckpoint&&) noexcept;
  /// Copies the options and the bookkeeping.
  ModelCheckpoint& operator=(const ModelCheckpoint&);
  /// Moves the options and the bookkeeping.
  ModelCheckpoint& operator=(ModelCheckpoint&&) noexcept;
  ~ModelCheckpoint();

  /// The options as given.
  const ModelCheckpointOptions& options() const { return options_; }
  /// The best checkpoint saved so far (empty before the first save).
  const std::filesystem::path& best_model_path() const { return best_model_path_; }
  /// The monitored value of best_model_path(); nullopt without a monitor or before the first save.
  std::optional<double> best_model_score() const { return best_model_score_; }
  /// The last checkpoint written (`last.ckpt` when save_last is on); empty before the first.
  const std::filesystem::path& last_model_path() const { return last_model_path_; }
  /// The kept top-k checkpoints and their monitored values.
  const std::map<std::filesystem::path, double>& best_k_models() const { return best_k_models_; }
  /// The folder checkpoints go to; empty until setup() resolves it.
  const std::filesystem::path& dirpath() const { return dirpath_; }

  /// Lightning's name formatting: `{epoch}` -> `epoch=3` (with auto_insert_metric_name), metric values with
  /// an optional printf format (`{val_loss:.2f}`); unknown names are left as written.
  std::string format_checkpoint_name(const std::map<std::string, double, std::less<>>& metrics) const;

  /// Hook at the start of fit: resolves the folder (options.dirpath, else `<log_dir>/checkpoints`), then
  /// applies the state a resumed checkpoint brought (load_state runs before the folder is known).
  template <class State>
  void setup(State& state) {
    if (dirpath_.empty()) {
      dirpath_ = !options_.dirpath.empty() ? options_.dirpath : state.log_dir() / "checkpoints";
    }
    if (restored_) apply_restored();
  }

  /// Hook at the start of training: the time train_time_interval counts from.
  template <class State>
  void on_train_start(State&) { time_trigger_.start(); }

  /// Hook after each training batch: saves by every_n_train_steps or train_time_interval (alike on every rank).
  template <class State>
  void on_train_batch_end(State& state, const torch::Tensor&, std::int64_t) {
    if (should_skip(state)) return;
    const bool by_steps = every_n_train_steps_ >= 1 && state.global_step % every_n_train_steps_ == 0;
    if (time_trigger_.due(state) || by_steps) save_topk_and_last(state);
  }

  /// Hook at the end of each training epoch: saves (every_n_epochs) when saving happens at the epoch end.
  template <class State>
  void on_train_epoch_end(State& state) {
    if (should_skip(state) || !save_on_train_epoch_end(state)) return;
    if (every_n_epochs_ >= 1 && (state.current_epoch + 1) % every_n_epochs_ == 0) save_topk(state);
    save_last(state);
  }

  /// Hook at the end of each validation run: saves (every_n_epochs) when saving does not happen at the epoch end.
  template <class State>
  void on_validation_end(State& state) {
    if (should_skip(state) || save_on_train_epoch_end(state)) return;
    if (every_n_epochs_ >= 1 && (state.current_epoch + 1) % every_n_epochs_ == 0) save_topk(state);
    save_last(state);
  }

  /// Writes the best and last paths, the best score, the kept top-k and the last saved step into a checkpoint.
  void save_state(torch::serialize::OutputArchive& archive) const;

  /// Reads what save_state wrote; it takes effect once the folder is known (at once when it is, else in
  /// setup()). Throws what LibTorch's archive throws when a key is missing.
  void load_state(torch::serialize::InputArchive& archive);

 private:
  double worst_value() const;
  bool better(double current, double reference) const;

  static std::string format_value(const std::string& name, double value, const std::string& format);

  template <class State>
  bool should_skip(const State& state) const {
    return state.stage != State::Stage::fitting || state.fast_dev_run || state.global_step == last_global_step_saved_;
  }

  template <class State>
  bool save_on_train_epoch_end(const State& state) const {
    if (options_.save_on_train_epoch_end) return *options_.save_on_train_epoch_end;
    if (!state.has_validation) return true;
    return state.validates_at_epoch_end;
  }

  template <class State>
  std::map<std::string, double, std::less<>> monitor_candidates(State& state) const {
    auto metrics = state.callback_metrics();
    metrics["epoch"] = static_cast<double>(state.current_epoch);
    metrics["step"] = static_cast<double>(state.global_step);
    return metrics;
  }

  std::filesystem::path unique_path(const std::string& name, const std::filesystem::path& keep) const;

  /// Saves to `path`; false when the save failed and the Trainer only logged it (on_checkpoint_failure=warn).
  template <class State>
  bool write(State& state, const std::filesystem::path& path) {
    if (!state.save_checkpoint) return true;  // no Trainer behind the state (unit tests): bookkeeping only
    state.save_checkpoint(path, options_.save_weights_only);
    if (!state.last_checkpoint_saved) return false;
    ++saves_;
    rewritable_.erase(path);
    last_global_step_saved_ = state.global_step;
    if (options_.verbose && state.is_global_zero) log::info("Epoch " + std::to_string(state.current_epoch) +
                                                            ", global step " + std::to_string(state.global_step) +
                                                            ": saving model to " + path.string());
    return true;
  }

  template <class State>
  void remove(const State& state, const std::filesystem::path& path) const {
    if (!state.is_global_zero || path.empty()) return;
    std::error_code ignored;
    std::filesystem::remove(path, ignored);
  }

  template <class State>
  void save_topk_and_last(State& state) {
    save_topk(state);
    save_last(state);
  }

  template <class State>
  void save_topk(State& state) {
    const auto best_before = best_model_path_;
    const auto saves_before = saves_;
    save_topk_files(state);
    if (options_.export_safetensors && best_model_path_ != best_before) export_best_weights(state);
    if (saves_ != saves_before) notify_loggers(state);
  }

  /// Lightning's after_save_checkpoint, on global rank zero, once the bookkeeping of the save is done.
  template <class State>
  void notify_loggers(const State& state) const {
    if constexpr (requires { state.loggers; }) {
      if (!state.is_global_zero || state.loggers.empty()) return;
      const SavedCheckpoints saved = saved_checkpoints();
      for (auto* logger : state.loggers) logger->after_save_checkpoint(saved);
    }
  }

  SavedCheckpoints saved_checkpoints() const;

  template <class State>
  void export_best_weights(State& state) const {  // the model was just saved as the new best checkpoint
    if (!state.is_global_zero || state.model == nullptr || best_model_path_.empty()) return;
    SafetensorsMetadata metadata{{"format", "pt"}, {"checkpoint", best_model_path_.filename().string()},
                                 {"epoch", std::to_string(state.current_epoch)}, {"step", std::to_string(state.global_step)}};
    if (!options_.monitor.empty() && best_model_score_) {
      std::ostringstream score;
      score << std::setprecision(17) << *best_model_score_;
      metadata["monitor"] = options_.monitor;
      metadata["score"] = score.str();
    }
    try {
      save_safetensors(*state.model, dirpath_ / name_best_safetensors, metadata);
    } catch (const std::exception& error) {
      log::warn_rank_zero(std::string(error.what()) + "; training continues (ModelCheckpoint export_safetensors).");
    }
  }

  template <class State>
  void save_topk_files(State& state) {
    if (options_.save_top_k == 0) return;
    auto metrics = monitor_candidates(state);
    if (options_.monitor.empty()) {
      const auto previous = best_model_path_;
      const auto path = unique_path(format_checkpoint_name(metrics), previous);
      // The new file first: a failed save keeps the previous one.
      if (!write(state, path)) return;
      if (options_.save_top_k == 1 && !previous.empty() && previous != path) remove(state, previous);
      best_model_path_ = path;
      return;
    }
    auto it = metrics.find(options_.monitor);
    if (it == metrics.end()) {
      std::string available;
      for (const auto& [key, value] : metrics) available += (available.empty() ? "'" : ", '") + key + "'";
      const std::string message = "`ModelCheckpoint(monitor='" + options_.monitor +
                                  "')` could not find the monitored key in the returned metrics: [" + available +
                                  "]. HINT: Did you call `log(\"" + options_.monitor + "\", value)` in your model?";
      // As Lightning: an error once validation has run (the key will never come), else a warning (training
      // stopped before the first validation, e.g. by max_steps).
      if (state.validation_has_run) throw MisconfigurationError(message);
      log::warn_once(message);
      return;
    }
    double current = it->second;
    if (std::isnan(current)) current = worst_value();  // NaN ranks last
    current_score_ = current;
    const bool keep = options_.save_top_k == -1 || static_cast<int>(best_k_models_.size()) < options_.save_top_k ||
                      better(current, kth_value_);
    if (!keep) {
      if (options_.verbose && state.is_global_zero) {
        log::info("Epoch " + std::to_string(state.current_epoch) + ", global step " +
                  std::to_string(state.global_step) + ": '" + options_.monitor + "' was not in top " +
                  std::to_string(options_.save_top_k));
      }
      return;
    }
    const auto path = unique_path(format_checkpoint_name(metrics), {});
    // The new file first, then the one it displaces: a failed save keeps the previous best.
    if (!write(state, path)) return;
    best_k_models_[path] = current;
    if (options_.save_top_k != -1 && static_cast<int>(best_k_models_.size()) > options_.save_top_k) {
      const auto worst = worst_path();
      best_k_models_.erase(worst);
      if (worst != path) remove(state, worst);
    }
    update_kth();
  }

  std::filesystem::path worst_path() const;

  void update_kth();

  template <class State>
  void save_last(State& state) {
    if (!options_.save_last) return;
    const auto path = dirpath_ / (std::string(name_last) + file_extension);
    // The same step may already be saved under a top-k name; last.ckpt is still refreshed.
    if (state.save_checkpoint) state.save_checkpoint(path, options_.save_weights_only);
    last_global_step_saved_ = state.global_step;
    last_model_path_ = path;
    notify_loggers(state);
  }

  /// Lightning's load_state_dict once the folder is known (another folder: only best_model_path is restored).
  void apply_restored();

  ModelCheckpointOptions options_;
  std::int64_t every_n_train_steps_ = 0;
  detail::TimeTrigger time_trigger_{options_.train_time_interval};
  std::int64_t every_n_epochs_ = 1;
  std::filesystem::path dirpath_{};
  std::filesystem::path best_model_path_{};
  std::optional<double> best_model_score_{};
  std::filesystem::path last_model_path_{};
  std::map<std::filesystem::path, double> best_k_models_{};
  std::optional<double> current_score_{};
  std::int64_t saves_ = 0;
  double kth_value_ = 0;
  std::int64_t last_global_step_saved_ = -1;
  std::optional<detail::CheckpointCallbackState> restored_{};
  std::set<std::filesystem::path> rewritable_{};  // written after the resumed checkpoint by an interrupted attempt
};

}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/callbacks/impl/model_checkpoint.ipp>
#endif

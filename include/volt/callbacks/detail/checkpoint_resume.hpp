/// \file
/// What volt::ModelCheckpoint needs when a fit resumes from a checkpoint: the bookkeeping read from it (kept
/// until the folder is known), whether the folder changed (Lightning's rule), and the files an interrupted
/// attempt of the same run wrote after that checkpoint.
#pragma once

#include <volt/core/log.hpp>

#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <system_error>

namespace volt::detail {

/// ModelCheckpoint's bookkeeping as read from a checkpoint.
struct CheckpointCallbackState {
  std::filesystem::path best_model_path{};
  std::filesystem::path last_model_path{};
  std::optional<double> best_model_score{};
  std::map<std::filesystem::path, double> best_k_models{};
  std::int64_t last_global_step_saved = -1;
  /// The folder the checkpoint's callback saved to (empty: an older checkpoint that did not record it).
  std::filesystem::path dirpath{};
  /// When the checkpoint's state was taken (file clock ticks; nullopt: not recorded).
  std::optional<std::int64_t> saved_at{};
};

/// Reads what ModelCheckpoint::save_state wrote. Throws what LibTorch's archive throws when a key is missing.
inline CheckpointCallbackState read_checkpoint_callback_state(torch::serialize::InputArchive& archive) {
    detail::CheckpointCallbackState restored;
    c10::IValue value;
    archive.read("best_model_path", value);
    restored.best_model_path = value.toStringRef();
    archive.read("last_model_path", value);
    restored.last_model_path = value.toStringRef();
    archive.read("best_model_score", value);
    const double score = value.toDouble();
    restored.best_model_score = std::isnan(score) ? std::nullopt : std::optional<double>(score);
    c10::IValue paths;
    c10::IValue scores;
    archive.read("best_k_paths", paths);
    archive.read("best_k_scores", scores);
    const auto path_list = paths.toList();
    const auto score_list = scores.toDoubleList();
    for (std::size_t i = 0; i < path_list.size(); ++i) {
      restored.best_k_models[path_list.get(i).toStringRef()] = score_list.get(i);
    }
    archive.read("last_global_step_saved", value);
    restored.last_global_step_saved = value.toInt();
    if (archive.try_read("dirpath", value) && value.isString()) restored.dirpath = value.toStringRef();
    if (archive.try_read("saved_at", value) && value.isInt()) restored.saved_at = value.toInt();
    return restored;
}

/// The current time in std::filesystem's file clock ticks (what last_write_time compares with).
inline std::int64_t file_clock_now() {
  return static_cast<std::int64_t>(std::filesystem::file_time_type::clock::now().time_since_epoch().count());
}

/// Whether two checkpoint folders are the same (compared as absolute, normalized paths, as Lightning compares
/// its realpath'ed dirpath).
inline bool same_checkpoint_folder(const std::filesystem::path& a, const std::filesystem::path& b) {
  std::error_code error;
  const auto absolute_a = std::filesystem::absolute(a, error).lexically_normal();
  const auto absolute_b = std::filesystem::absolute(b, error).lexically_normal();
  const auto trim = [](std::filesystem::path p) {
    auto text = p.string();
    while (text.size() > 1 && text.back() == '/') text.pop_back();
    return text;
  };
  return trim(absolute_a) == trim(absolute_b);
}

/// Lightning's warning when the checkpoint folder changed between the run saved and the run resuming.
inline std::string dirpath_changed_warning(const std::filesystem::path& from, const std::filesystem::path& to) {
  return "The dirpath has changed from '" + from.string() + "' to '" + to.string() +
         "', therefore `best_model_score`, `kth_best_model_path`, `kth_value`, `last_model_path` and "
         "`best_k_models` won't be reloaded. Only `best_model_path` will be reloaded.";
}

/// The `.ckpt` files in `folder` that `state` does not track and that were written after its checkpoint was
/// taken: files of an interrupted attempt of the same run (killed between writing a checkpoint and writing
/// the one resumed from). The resumed run rewrites them under the same names instead of adding `-vN`
/// copies; files that existed before the run started are older and not listed.
inline std::set<std::filesystem::path> files_written_after(const std::filesystem::path& folder,
                                                           const CheckpointCallbackState& state) {
  std::set<std::filesystem::path> out;
  if (!state.saved_at) return out;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(folder, error)) {
    const auto& path = entry.path();
    if (path.extension() != ".ckpt" || !entry.is_regular_file(error)) continue;
    if (state.best_k_models.count(path) || path == state.best_model_path || path == state.last_model_path) continue;
    const auto written = std::filesystem::last_write_time(path, error);
    if (error) continue;
    if (static_cast<std::int64_t>(written.time_since_epoch().count()) > *state.saved_at) out.insert(path);
  }
  return out;
}

}  // namespace volt::detail

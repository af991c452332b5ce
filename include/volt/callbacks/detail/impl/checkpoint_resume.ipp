/// \file
/// Definitions of the functions declared in volt/callbacks/detail/checkpoint_resume.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE CheckpointCallbackState read_checkpoint_callback_state(torch::serialize::InputArchive& archive) {
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

VOLT_INLINE std::int64_t file_clock_now() {
  return static_cast<std::int64_t>(std::filesystem::file_time_type::clock::now().time_since_epoch().count());
}

VOLT_INLINE bool same_checkpoint_folder(const std::filesystem::path& a, const std::filesystem::path& b) {
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

VOLT_INLINE std::string dirpath_changed_warning(const std::filesystem::path& from, const std::filesystem::path& to) {
  return "The dirpath has changed from '" + from.string() + "' to '" + to.string() +
         "', therefore `best_model_score`, `kth_best_model_path`, `kth_value`, `last_model_path` and "
         "`best_k_models` won't be reloaded. Only `best_model_path` will be reloaded.";
}

VOLT_INLINE std::set<std::filesystem::path> files_written_after(const std::filesystem::path& folder,
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

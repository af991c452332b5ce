/// \file
/// Definitions of the functions declared in volt/callbacks/model_checkpoint.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt {

VOLT_INLINE std::string ModelCheckpoint::format_checkpoint_name(const std::map<std::string, double, std::less<>>& metrics) const {
  const std::string pattern = options_.filename.empty() ? "{epoch}-{step}" : options_.filename;
  std::string out;
  std::size_t pos = 0;
  while (pos < pattern.size()) {
    const auto open = pattern.find('{', pos);
    const auto close = open == std::string::npos ? std::string::npos : pattern.find('}', open);
    if (close == std::string::npos) {
      out += pattern.substr(pos);
      break;
    }
    out += pattern.substr(pos, open - pos);
    const std::string field = pattern.substr(open + 1, close - open - 1);
    const auto colon = field.find(':');
    const std::string name = field.substr(0, colon);
    const std::string format = colon == std::string::npos ? "" : field.substr(colon + 1);
    if (auto it = metrics.find(name); it != metrics.end()) {
      if (options_.auto_insert_metric_name) out += name + "=";
      out += format_value(name, it->second, format);
    } else {
      out += "{" + field + "}";
    }
    pos = close + 1;
  }
  return out;
}

VOLT_INLINE void ModelCheckpoint::save_state(torch::serialize::OutputArchive& archive) const {
  archive.write("best_model_path", c10::IValue(best_model_path_.string()));
  archive.write("last_model_path", c10::IValue(last_model_path_.string()));
  archive.write("best_model_score", c10::IValue(best_model_score_.value_or(std::nan(""))));
  std::vector<std::string> paths;
  std::vector<double> scores;
  for (const auto& [path, score] : best_k_models_) {
    paths.push_back(path.string());
    scores.push_back(score);
  }
  archive.write("best_k_paths", c10::IValue(c10::List<std::string>(paths)));
  archive.write("best_k_scores", c10::IValue(c10::List<double>(scores)));
  archive.write("last_global_step_saved", c10::IValue(last_global_step_saved_));
  archive.write("dirpath", c10::IValue(dirpath_.string()));
  archive.write("saved_at", c10::IValue(detail::file_clock_now()));
}

VOLT_INLINE void ModelCheckpoint::load_state(torch::serialize::InputArchive& archive) {
  restored_ = detail::read_checkpoint_callback_state(archive);
  if (!dirpath_.empty()) apply_restored();
}

VOLT_INLINE double ModelCheckpoint::worst_value() const {
  return options_.mode == "min" ? std::numeric_limits<double>::infinity()
                                : -std::numeric_limits<double>::infinity();
}

VOLT_INLINE bool ModelCheckpoint::better(double current, double reference) const {
  return options_.mode == "min" ? current < reference : current > reference;
}

VOLT_INLINE std::string ModelCheckpoint::format_value(const std::string& name, double value,
                                                      const std::string& format) {
  char buffer[64];
  if (!format.empty()) {
    std::snprintf(buffer, sizeof buffer, ("%" + format).c_str(), value);
  } else if ((name == "epoch" || name == "step") && value == std::floor(value)) {
    std::snprintf(buffer, sizeof buffer, "%lld", static_cast<long long>(value));
  } else {
    std::snprintf(buffer, sizeof buffer, "%.4g", value);
  }
  return buffer;
}

VOLT_INLINE auto ModelCheckpoint::unique_path(const std::string& name, const std::filesystem::path& keep) const -> std::filesystem::path {
  auto path = dirpath_ / (name + file_extension);
  if (!options_.enable_version_counter) return path;
  for (int version = 1; std::filesystem::exists(path) && path != keep && !rewritable_.count(path); ++version) {
    path = dirpath_ / (name + "-v" + std::to_string(version) + file_extension);
  }
  return path;
}

VOLT_INLINE auto ModelCheckpoint::worst_path() const -> std::filesystem::path {
  auto worst = best_k_models_.begin();
  for (auto it = best_k_models_.begin(); it != best_k_models_.end(); ++it) {
    if (better(worst->second, it->second)) worst = it;
  }
  return worst->first;
}

VOLT_INLINE void ModelCheckpoint::update_kth() {
  if (best_k_models_.empty()) {
    kth_value_ = worst_value();
    return;
  }
  kth_value_ = best_k_models_.at(worst_path());
  auto best = best_k_models_.begin();
  for (auto it = best_k_models_.begin(); it != best_k_models_.end(); ++it) {
    if (better(it->second, best->second)) best = it;
  }
  best_model_path_ = best->first;
  best_model_score_ = best->second;
}

VOLT_INLINE void ModelCheckpoint::apply_restored() {
  auto restored = std::move(*restored_);
  restored_.reset();
  if (restored.dirpath.empty() || detail::same_checkpoint_folder(restored.dirpath, dirpath_)) {
    best_model_score_ = restored.best_model_score;
    last_model_path_ = restored.last_model_path;
    best_k_models_ = restored.best_k_models;
    last_global_step_saved_ = restored.last_global_step_saved;
    update_kth();
    rewritable_ = detail::files_written_after(dirpath_, restored);
  } else {
    log::warn(detail::dirpath_changed_warning(restored.dirpath, dirpath_));
  }
  best_model_path_ = restored.best_model_path;
}

}  // namespace volt

namespace volt {

// Out of line: a program that adds a ModelCheckpoint does not compile its copies and destructor again (with
// VOLT_SEPARATE_COMPILATION).
VOLT_INLINE ModelCheckpoint::ModelCheckpoint(const ModelCheckpoint&) = default;
VOLT_INLINE ModelCheckpoint::ModelCheckpoint(ModelCheckpoint&&) noexcept = default;
VOLT_INLINE ModelCheckpoint& ModelCheckpoint::operator=(const ModelCheckpoint&) = default;
VOLT_INLINE ModelCheckpoint& ModelCheckpoint::operator=(ModelCheckpoint&&) noexcept = default;
VOLT_INLINE ModelCheckpoint::~ModelCheckpoint() = default;

VOLT_INLINE ModelCheckpoint::ModelCheckpoint(ModelCheckpointOptions options)
    : options_(std::move(options)) {
  const auto intervals = detail::check_model_checkpoint_options(options_);
  every_n_train_steps_ = intervals.every_n_train_steps;
  every_n_epochs_ = intervals.every_n_epochs;
  kth_value_ = worst_value();
  best_model_score_ = std::nullopt;
}

VOLT_INLINE SavedCheckpoints ModelCheckpoint::saved_checkpoints() const {
  SavedCheckpoints saved;
  saved.last_model_path = last_model_path_;
  saved.current_score = current_score_;
  saved.best_model_path = best_model_path_;
  saved.best_model_score = best_model_score_;
  saved.best_k_models = best_k_models_;
  saved.monitor = options_.monitor;
  saved.mode = options_.mode;
  saved.save_last = options_.save_last;
  saved.save_top_k = options_.save_top_k;
  saved.save_weights_only = options_.save_weights_only;
  saved.every_n_train_steps = every_n_train_steps_;
  return saved;
}

}  // namespace volt

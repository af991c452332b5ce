/// \file
/// Definitions of the functions declared in volt/profilers/profiler.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

#include <c10/util/Type.h>

#include <cstdio>
#include <stdexcept>
#include <system_error>

namespace volt {

VOLT_INLINE void Profiler::setup(std::string_view stage, std::optional<int> local_rank,
                                 const std::filesystem::path& log_dir) {
  stage_ = std::string(stage);
  local_rank_ = local_rank;
  if (dirpath_.empty()) dirpath_ = log_dir;
}

VOLT_INLINE void Profiler::describe() {
  const std::string text = summary();
  if (!text.empty()) write_report(text);
  teardown();
}

VOLT_INLINE void Profiler::teardown() {
  if (output_.is_open()) output_.close();
}

VOLT_INLINE std::string Profiler::prepare_filename(std::string_view action, std::string_view extension) const {
  std::string base;
  auto append = [&](std::string_view part) {
    if (!base.empty()) base += '-';
    base += part;
  };
  if (!stage_.empty()) append(stage_);
  if (!filename_.empty()) append(filename_);
  if (local_rank_) append(std::to_string(*local_rank_));
  if (!action.empty()) append(action);
  std::string safe;
  for (const char c : base) {
    const bool unsafe = std::string_view("\\/:*?\"<>|\n\r\t").find(c) != std::string_view::npos;
    const char out = unsafe ? '_' : c;
    if (out == '_' && !safe.empty() && safe.back() == '_') continue;  // runs of '_' become one
    safe += out;
  }
  const auto first = safe.find_first_not_of(' ');
  const auto last = safe.find_last_not_of(' ');
  safe = first == std::string::npos ? std::string("profile") : safe.substr(first, last - first + 1);
  return safe + std::string(extension);
}

VOLT_INLINE void Profiler::write_report(std::string_view text) {
  if (filename_.empty() || dirpath_.empty()) {
    if (!local_rank_ || *local_rank_ == 0) log::info(text);
    return;
  }
  if (!output_.is_open()) {
    std::error_code error;
    std::filesystem::create_directories(dirpath_, error);
    const auto path = dirpath_ / prepare_filename();
    output_.open(path, std::ios::app);
    if (!output_) throw std::runtime_error("volt: cannot open the profiler report " + path.string() + " for writing");
  }
  output_ << text;
  output_.flush();
  if (!output_) throw std::runtime_error("volt: writing the profiler report in " + dirpath_.string() + " failed");
}

namespace detail {

/// `text` left-aligned in `width` characters (Python's `{text:<width}`).
inline std::string pad_right(std::string_view text, std::size_t width) {
  std::string out(text);
  if (out.size() < width) out.append(width - out.size(), ' ');
  return out;
}

/// The length of `text` with its tabs expanded to columns of 8 (Python's str.expandtabs()).
inline std::size_t expanded_length(std::string_view text) {
  std::size_t column = 0;
  for (const char c : text) {
    if (c == '\n') {
      column = 0;
    } else if (c == '\t') {
      column += 8 - column % 8;
    } else {
      ++column;
    }
  }
  return column;
}

VOLT_INLINE std::string profiled_type_name(const char* mangled) {
  std::string name = c10::demangle(mangled);
  const auto scope = name.rfind("::", name.find('<'));
  if (scope != std::string::npos) name.erase(0, scope + 2);
  return name;
}

VOLT_INLINE std::string python_g5(double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.5g", value);
  std::string text(buffer);
  if (text.find_first_of(".eni") == std::string::npos) text += ".0";
  return text;
}

}  // namespace detail
}  // namespace volt

namespace volt {

VOLT_INLINE ProfileScope::ProfileScope(Profiler* profiler, std::string action)
    : profiler_(profiler), action_(std::move(action)) {
  if (profiler_) profiler_->start(action_);
}

VOLT_INLINE ProfileScope::~ProfileScope() {
  if (!profiler_) return;
  try {
    profiler_->stop(action_);
  } catch (const std::exception& error) {
    log::warn(std::string("volt: the profiler failed to stop ") + action_ + ": " + error.what());
  }
}
}  // namespace volt

namespace volt::detail {

VOLT_INLINE ProfiledStage::ProfiledStage(Profiler* profiler, std::string_view stage, std::optional<int> local_rank,
                                         const std::filesystem::path& log_dir)
    : profiler_(profiler) {
  if (profiler_) profiler_->setup(stage, local_rank, log_dir);
}

VOLT_INLINE ProfiledStage::~ProfiledStage() {
  if (!profiler_) return;
  try {
    profiler_->describe();
  } catch (const std::exception& error) {
    log::warn(std::string("volt: the profiler's report was not written: ") + error.what());
  }
}

}  // namespace volt::detail

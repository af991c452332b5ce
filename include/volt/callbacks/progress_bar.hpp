/// \file
/// volt::ProgressBar: epoch, batch/total, it/s, ETA and the prog_bar metrics, on global rank zero.
///
/// On a terminal the line is redrawn in place (at most every refresh_interval seconds, so reading the
/// metrics, which syncs with the device, stays rare); when stderr is not a terminal (CI logs, files) it
/// prints one line per epoch.
#pragma once


#include <volt/core/linkage.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>

#if defined(_WIN32)
#include <io.h>
#else
#include <unistd.h>
#endif

namespace volt {

/// The options of volt::ProgressBar.
struct ProgressBarOptions {
  /// Seconds between redraws on a terminal.
  double refresh_interval = 0.1;
  /// Where to draw; nullptr: std::cerr.
  std::ostream* stream = nullptr;
  /// Force terminal (in-place) or line mode; nullopt: detect whether stderr is a terminal.
  std::optional<bool> terminal{};
};

/// Callback: draws the training progress on global rank zero; other ranks do nothing.
class ProgressBar {
 public:
  /// Keeps the options; draws nothing until training starts.
  explicit ProgressBar(ProgressBarOptions options = {}) : options_(options) {}

  /// Hook at each training epoch start: restarts the epoch's clock and batch count.
  template <class State>
  void on_train_epoch_start(State& state) {
    if (!state.is_global_zero) return;
    epoch_start_ = last_draw_ = Clock::now();
    batches_ = 0;
  }

  /// Hook after each training batch: on a terminal, redraws the line at most every refresh_interval seconds.
  template <class State>
  void on_train_batch_end(State& state, const torch::Tensor&, std::int64_t batch_idx) {
    if (!state.is_global_zero) return;
    batches_ = batch_idx + 1;
    if (!terminal()) return;
    const auto now = Clock::now();
    if (std::chrono::duration<double>(now - last_draw_).count() < options_.refresh_interval) return;
    last_draw_ = now;
    draw(state, false);
  }

  /// Hook at each training epoch end: draws the epoch's final line (in line mode, its only line).
  template <class State>
  void on_train_epoch_end(State& state) {
    if (!state.is_global_zero || batches_ == 0) return;
    draw(state, true);
  }

  /// The text of the bar for the current state (exposed for tests).
  template <class State>
  std::string render(State& state) const {
    const double elapsed = std::chrono::duration<double>(Clock::now() - epoch_start_).count();
    const double rate = elapsed > 0 ? static_cast<double>(batches_) / elapsed : 0.0;
    std::ostringstream line;
    line << "Epoch " << state.current_epoch;
    if (state.max_epochs && *state.max_epochs > 0) line << '/' << *state.max_epochs - 1;
    line << ": ";
    const auto total = state.num_training_batches;
    if (total && *total > 0) {
      const double done = std::min(1.0, static_cast<double>(batches_) / static_cast<double>(*total));
      constexpr int width = 20;
      const int filled = static_cast<int>(done * width);
      char percent[8];
      std::snprintf(percent, sizeof percent, "%3d%%", static_cast<int>(done * 100));
      line << percent << '|' << std::string(static_cast<std::size_t>(filled), '#')
           << std::string(static_cast<std::size_t>(width - filled), ' ') << "| " << batches_ << '/' << *total;
      const double remaining = rate > 0 ? static_cast<double>(*total - batches_) / rate : 0.0;
      line << " [" << clock_text(elapsed) << '<' << clock_text(remaining);
    } else {
      line << batches_ << " batches [" << clock_text(elapsed);
    }
    char rate_text[32];
    std::snprintf(rate_text, sizeof rate_text, ", %.2fit/s", rate);
    line << rate_text;
    for (const auto& [key, value] : state.progress_bar_metrics()) {
      char number[48];
      std::snprintf(number, sizeof number, "%.3g", value);
      line << ", " << key << '=' << number;
    }
    line << ']';
    return line.str();
  }

 private:
  using Clock = std::chrono::steady_clock;

  static std::string clock_text(double seconds);

  bool terminal() const;

  template <class State>
  void draw(State& state, bool final) {
    std::ostream& out = options_.stream != nullptr ? *options_.stream : std::cerr;
    const std::string text = render(state);
    if (terminal()) {
      out << '\r' << text << "\033[K";
      if (final) out << '\n';
    } else if (final) {
      out << text << '\n';
    }
    out.flush();
  }

  ProgressBarOptions options_;
  Clock::time_point epoch_start_{};
  Clock::time_point last_draw_{};
  std::int64_t batches_ = 0;
};

}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/callbacks/impl/progress_bar.ipp>
#endif

/// \file
/// What the learning-rate finder records (volt::LRFinderResult), Lightning's suggestion rule, and the plot
/// written as an SVG file. Usable on its own: a result filled with any lrs and losses gives Lightning's
/// suggestion for that curve.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/files.hpp>
#include <volt/core/log.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace volt {

/// The learning-rate sweep and its losses (Lightning's `lr_finder.results`), with the suggestion rule.
struct LRFinderResult {
  /// "exponential" or "linear": how the learning rate grew (the plot's x axis is logarithmic for
  /// "exponential").
  std::string mode = "exponential";
  /// The learning rate of each recorded optimizer step, in order (Lightning's results["lr"]).
  std::vector<double> lrs;
  /// The smoothed training loss after each of those steps (Lightning's results["loss"]; NaN where the
  /// step returned no loss).
  std::vector<double> losses;
  /// Whether the sweep stopped before num_training steps because the smoothed loss diverged.
  bool stopped_early = false;

  /// Lightning's suggestion rule: the index of the steepest descent of the loss. The points are
  /// `[skip_begin:-skip_end]` (Python's slice, so skip_end 0 leaves no point, as in Lightning), without
  /// the non-finite losses; the gradient of the losses with respect to the learning rates is
  /// torch.gradient's (second order inside, first order at the ends, in float32 as Lightning computes it)
  /// and the suggestion is its first minimum. With fewer than 2 points, logs Lightning's message ("Failed
  /// to compute suggestion for learning rate because there are not enough points. ...") and returns
  /// std::nullopt.
  std::optional<std::size_t> suggestion_index(std::int64_t skip_begin = 10, std::int64_t skip_end = 1) const;

  /// The learning rate at suggestion_index(), or std::nullopt (Lightning's `lr_finder.suggestion()`).
  std::optional<double> suggestion(std::int64_t skip_begin = 10, std::int64_t skip_end = 1) const;

  /// The plot as an SVG document (see write_svg).
  std::string svg(bool suggest = true) const;

  /// Writes the plot (Lightning's `lr_finder.plot()`) to `path` as an SVG file any browser opens: the
  /// smoothed loss against the learning rate (logarithmic x axis for "exponential"), axes with ticks, and,
  /// when `suggest` and a suggestion exists, the suggested point marked in red. The file is written to a
  /// temporary file and renamed, so a failed write leaves no partial file; throws std::runtime_error naming
  /// the path and the system error.
  void write_svg(const std::filesystem::path& path, bool suggest = true) const;
};

namespace detail {

/// `value` with 4 significant digits ("1e-05", "0.25"), for tick labels.
VOLT_INLINE std::string svg_number(double value);

/// Five evenly spaced ticks between `low` and `high` (powers of ten on a log axis).
VOLT_INLINE std::vector<double> svg_ticks(double low, double high, bool log_axis);

}  // namespace detail



}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/tuner/impl/lr_finder_result.ipp>
#endif

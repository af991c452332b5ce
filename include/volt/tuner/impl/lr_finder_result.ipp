/// \file
/// Definitions of the functions declared in volt/tuner/lr_finder_result.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

#include <random>

namespace volt::detail {

VOLT_INLINE std::string svg_number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.4g", value);
  return buffer;
}

VOLT_INLINE std::vector<double> svg_ticks(double low, double high, bool log_axis) {
  std::vector<double> ticks;
  if (log_axis) {
    const double first = std::ceil(low - 1e-9), last = std::floor(high + 1e-9);
    const double stride = std::max(1.0, std::ceil((last - first) / 6.0));
    for (double e = first; e <= last + 1e-9; e += stride) ticks.push_back(e);
  } else {
    for (int i = 0; i <= 4; ++i) ticks.push_back(low + (high - low) * i / 4.0);
  }
  return ticks;
}
}  // namespace volt::detail

namespace volt {

VOLT_INLINE std::string LRFinderResult::svg(bool suggest) const {
  const bool log_x = mode == "exponential";
  constexpr double width = 640, height = 440, left = 80, right = 20, top = 30, bottom = 60;
  std::vector<std::pair<double, double>> points;  // (x in axis units, loss) of the finite points
  const std::size_t size = std::min(lrs.size(), losses.size());
  for (std::size_t i = 0; i < size; ++i) {
    if (!std::isfinite(losses[i]) || !std::isfinite(lrs[i]) || (log_x && lrs[i] <= 0)) continue;
    points.emplace_back(log_x ? std::log10(lrs[i]) : lrs[i], losses[i]);
  }
  double x_low = 0, x_high = 1, y_low = 0, y_high = 1;
  if (!points.empty()) {
    x_low = x_high = points.front().first;
    y_low = y_high = points.front().second;
    for (const auto& [x, y] : points) {
      x_low = std::min(x_low, x), x_high = std::max(x_high, x), y_low = std::min(y_low, y), y_high = std::max(y_high, y);
    }
  }
  if (x_high - x_low <= 0) x_low -= 0.5, x_high += 0.5;
  if (y_high - y_low <= 0) y_low -= 0.5, y_high += 0.5;
  const double pad = (y_high - y_low) * 0.05;
  y_low -= pad, y_high += pad;
  const auto px = [&](double x) { return left + (x - x_low) / (x_high - x_low) * (width - left - right); };
  const auto py = [&](double y) { return top + (y_high - y) / (y_high - y_low) * (height - top - bottom); };
  const auto n = [](double v) { return detail::svg_number(v); };
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
                    n(width) + "\" height=\"" + n(height) + "\" viewBox=\"0 0 " + n(width) + " " + n(height) +
                    "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  const double x0 = left, x1 = width - right, y0 = height - bottom, y1 = top;
  out += "<g class=\"axes\" stroke=\"black\"><line x1=\"" + n(x0) + "\" y1=\"" + n(y0) + "\" x2=\"" + n(x1) + "\" y2=\"" +
         n(y0) + "\"/><line x1=\"" + n(x0) + "\" y1=\"" + n(y0) + "\" x2=\"" + n(x0) + "\" y2=\"" + n(y1) + "\"/></g>\n";
  out += "<g class=\"ticks\">";
  for (const double t : detail::svg_ticks(x_low, x_high, log_x)) {
    const std::string label = n(log_x ? std::pow(10.0, t) : t);
    out += "<line x1=\"" + n(px(t)) + "\" y1=\"" + n(y0) + "\" x2=\"" + n(px(t)) + "\" y2=\"" + n(y0 + 5) +
           "\" stroke=\"black\"/><text x=\"" + n(px(t)) + "\" y=\"" + n(y0 + 18) + "\" text-anchor=\"middle\">" + label +
           "</text>";
  }
  for (const double t : detail::svg_ticks(y_low, y_high, false)) {
    out += "<line x1=\"" + n(x0 - 5) + "\" y1=\"" + n(py(t)) + "\" x2=\"" + n(x0) + "\" y2=\"" + n(py(t)) +
           "\" stroke=\"black\"/><text x=\"" + n(x0 - 8) + "\" y=\"" + n(py(t) + 4) + "\" text-anchor=\"end\">" + n(t) +
           "</text>";
  }
  out += "</g>\n<text x=\"" + n((x0 + x1) / 2) + "\" y=\"" + n(height - 15) + "\" text-anchor=\"middle\">" +
         (log_x ? "Learning rate (log scale)" : "Learning rate") + "</text>\n<text x=\"15\" y=\"" + n((y0 + y1) / 2) +
         "\" text-anchor=\"middle\" transform=\"rotate(-90 15 " + n((y0 + y1) / 2) + ")\">Loss</text>\n";
  out += "<polyline class=\"loss\" fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" points=\"";
  for (std::size_t i = 0; i < points.size(); ++i) {
    out += (i == 0 ? "" : " ") + n(px(points[i].first)) + "," + n(py(points[i].second));
  }
  out += "\"/>\n";
  if (suggest) {
    if (const auto index = suggestion_index()) {
      const double x = log_x ? std::log10(lrs[*index]) : lrs[*index];
      out += "<circle class=\"suggestion\" cx=\"" + n(px(x)) + "\" cy=\"" + n(py(losses[*index])) +
             "\" r=\"6\" fill=\"red\"><title>suggested learning rate " + n(lrs[*index]) + "</title></circle>\n";
    }
  }
  return out + "</svg>\n";
}

VOLT_INLINE void LRFinderResult::write_svg(const std::filesystem::path& path, bool suggest) const {
  const std::string text = svg(suggest);
  detail::remove_stale_temporaries(path);
  const auto folder = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  const auto temporary = folder / ("." + path.filename().string() + ".tmp" + std::to_string(std::random_device{}()));
  const auto fail = [&](int error) {
    std::error_code ignored;
    std::filesystem::remove(temporary, ignored);
    throw std::runtime_error("volt: could not write the learning-rate finder plot " + path.string() + ": " +
                             (error != 0 ? std::generic_category().message(error) : std::string("the write failed")));
  };
  if (const auto failure = detail::write_file_durably(temporary, text)) fail(failure->error);
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) fail(error.value());
}

VOLT_INLINE auto LRFinderResult::suggestion_index(std::int64_t skip_begin, std::int64_t skip_end) const -> std::optional<std::size_t> {
  const auto size = static_cast<std::int64_t>(std::min(lrs.size(), losses.size()));
  const auto wrap = [size](std::int64_t i) { return std::clamp<std::int64_t>(i < 0 ? i + size : i, 0, size); };
  const std::int64_t begin = wrap(skip_begin);
  const std::int64_t end = wrap(-skip_end);
  std::vector<float> kept_losses, kept_lrs;
  std::vector<std::size_t> kept_index;
  for (std::int64_t i = begin; i < end; ++i) {
    const auto loss = static_cast<float>(losses[static_cast<std::size_t>(i)]);
    if (!std::isfinite(loss)) continue;
    kept_losses.push_back(loss);
    kept_lrs.push_back(static_cast<float>(lrs[static_cast<std::size_t>(i)]));
    kept_index.push_back(static_cast<std::size_t>(i));
  }
  if (kept_losses.size() < 2) {
    log::warn(
        "Failed to compute suggestion for learning rate because there are not enough points. Increase the loop "
        "iteration limits or the size of your dataset/dataloader.");
    return std::nullopt;
  }
  const auto n = static_cast<std::int64_t>(kept_losses.size());
  const torch::Tensor loss_tensor = torch::from_blob(kept_losses.data(), {n}, torch::kFloat32).clone();
  const torch::Tensor lr_tensor = torch::from_blob(kept_lrs.data(), {n}, torch::kFloat32).clone();
  const std::vector<torch::Tensor> spacing{lr_tensor};
  const torch::Tensor gradients = torch::gradient(loss_tensor, torch::TensorList(spacing), c10::optional<std::int64_t>(0), 1)[0];
  const auto steepest = torch::argmin(gradients).item<std::int64_t>();
  return kept_index[static_cast<std::size_t>(steepest)];
}

VOLT_INLINE auto LRFinderResult::suggestion(std::int64_t skip_begin, std::int64_t skip_end) const -> std::optional<double> {
  const auto index = suggestion_index(skip_begin, skip_end);
  if (!index) return std::nullopt;
  return lrs[*index];
}

}  // namespace volt

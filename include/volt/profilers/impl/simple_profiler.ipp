/// \file
/// Definitions of the functions declared in volt/profilers/simple_profiler.hpp: compiled in every translation
/// unit (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <cctype>
#include <tuple>

namespace volt {

VOLT_INLINE SimpleProfiler::SimpleProfiler(SimpleProfilerOptions options)
    : Profiler(std::move(options.dirpath), std::move(options.filename)), extended_(options.extended) {}

VOLT_INLINE void SimpleProfiler::start(std::string_view action) {
  if (running_.find(action) != running_.end()) {
    throw std::invalid_argument("Attempted to start " + std::string(action) + " which has already started.");
  }
  running_.emplace(std::string(action), Clock::now());
}

VOLT_INLINE void SimpleProfiler::stop(std::string_view action) {
  const auto end = Clock::now();
  const auto running = running_.find(action);
  if (running == running_.end()) {
    throw std::invalid_argument("Attempting to stop recording an action (" + std::string(action) +
                                ") which was never started.");
  }
  const double seconds = std::chrono::duration<double>(end - running->second).count();
  running_.erase(running);
  auto found = index_.find(action);
  if (found == index_.end()) {
    found = index_.emplace(std::string(action), records_.size()).first;
    records_.push_back({std::string(action), {}});
  }
  records_[found->second].durations.push_back(seconds);
}

VOLT_INLINE std::vector<double> SimpleProfiler::durations(std::string_view action) const {
  const auto found = index_.find(action);
  return found == index_.end() ? std::vector<double>{} : records_[found->second].durations;
}

VOLT_INLINE std::vector<std::string> SimpleProfiler::actions() const {
  std::vector<std::string> names;
  for (const auto& record : records_) names.push_back(record.action);
  return names;
}

VOLT_INLINE std::string SimpleProfiler::summary() {
  const std::string sep = "\n";
  std::string out;
  if (!stage().empty()) {
    std::string upper = stage();
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    out += upper + " ";
  }
  out += "Profiler Report" + sep;
  if (records_.empty()) return extended_ ? out + sep : std::string{};
  std::size_t key = 0;
  for (const auto& record : records_) key = std::max(key, record.action.size());
  using detail::pad_right;
  const auto sum = [](const std::vector<double>& values) { return std::accumulate(values.begin(), values.end(), 0.0); };
  if (extended_) {
    auto row = [&](std::string_view action, std::string_view mean, std::string_view calls, std::string_view total,
                   std::string_view share) {
      return sep + "|  " + pad_right(action, key) + "\t|  " + pad_right(mean, 15) + "\t|" + "  " +
             pad_right(calls, 15) + "\t|  " + pad_right(total, 15) + "\t|  " + pad_right(share, 15) + "\t|";
    };
    const std::string header = row("Action", "Mean duration (s)", "Num calls", "Total time (s)", "Percentage %");
    const std::string line = sep + std::string(detail::expanded_length(header) + 1, '-');
    const double elapsed = std::chrono::duration<double>(Clock::now() - created_).count();
    std::vector<std::tuple<std::string, double, std::size_t, double, double>> report;
    std::size_t calls = 0;
    for (const auto& record : records_) {
      const double total = sum(record.durations);
      const auto count = record.durations.size();
      report.emplace_back(record.action, total / static_cast<double>(count), count, total, 100.0 * total / elapsed);
      calls += count;
    }
    std::stable_sort(report.begin(), report.end(),
                     [](const auto& a, const auto& b) { return std::get<4>(a) > std::get<4>(b); });
    out += line + header + line;
    out += row("Total", "-", std::to_string(calls), detail::python_g5(elapsed), "100 %");
    out += line;
    for (const auto& [action, mean, count, total, share] : report) {
      out += row(action, detail::python_g5(mean), std::to_string(count), detail::python_g5(total),
                 detail::python_g5(share));
    }
    out += line;
  } else {
    auto row = [&](std::string_view action, std::string_view mean, std::string_view total) {
      return sep + "|  " + pad_right(action, key) + "\t|  " + pad_right(mean, 15) + "\t|  " + pad_right(total, 15) +
             "\t|";
    };
    const std::string header = row("Action", "Mean duration (s)", "Total time (s)");
    const std::string line = sep + std::string(detail::expanded_length(header) + 1, '-');
    std::vector<std::tuple<std::string, double, double>> report;
    for (const auto& record : records_) {
      const double total = sum(record.durations);
      report.emplace_back(record.action, total / static_cast<double>(record.durations.size()), total);
    }
    std::stable_sort(report.begin(), report.end(),
                     [](const auto& a, const auto& b) { return std::get<1>(a) > std::get<1>(b); });
    out += line + header + line;
    for (const auto& [action, mean, total] : report) {
      out += row(action, detail::python_g5(mean), detail::python_g5(total));
    }
    out += line;
  }
  return out + sep;
}

}  // namespace volt

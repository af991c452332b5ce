/// \file
/// Definitions of the functions declared in volt/profilers/pytorch_profiler.hpp: compiled in every translation
/// unit (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

#include <ATen/record_function.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/cuda.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <set>
#include <stdexcept>
#include <system_error>
#include <unistd.h>

namespace volt {

/// The Trainer's actions open while recording, as LibTorch user scopes (they show in the trace).
struct PyTorchProfiler::Annotations {
  std::map<std::string, std::unique_ptr<at::RecordFunction>, std::less<>> open;
};

namespace detail {

/// `text` as a JSON string literal.
inline std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char code[8];
          std::snprintf(code, sizeof(code), "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += code;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

/// Writes the events of `result` as a Chrome trace (the JSON object format: complete "X" events, times in
/// microseconds) to `path`, for LibTorch builds whose ProfilerResult::save writes nothing (no Kineto).
inline void write_chrome_trace(const torch::autograd::profiler::ProfilerResult& result,
                               const std::filesystem::path& path) {
  const auto temporary = std::filesystem::path(path.string() + ".tmp");
  {
    std::ofstream out(temporary);
    if (!out) throw std::runtime_error("volt: cannot write the profiler trace " + path.string());
    out << "{\"schemaVersion\": 1, \"displayTimeUnit\": \"ms\", \"traceEvents\": [";
    const auto pid = static_cast<long>(::getpid());
    bool first = true;
    for (const auto& event : result.events()) {
      const std::string name = event.name();
      if (name == "[memory]") continue;
      const bool device = event.deviceType() != c10::DeviceType::CPU;
      out << (first ? "\n" : ",\n") << "{\"ph\": \"X\", \"cat\": " << (device ? "\"kernel\"" : "\"cpu_op\"")
          << ", \"name\": " << json_string(name) << ", \"pid\": " << (device ? static_cast<long>(event.deviceIndex()) : pid)
          << ", \"tid\": " << (device ? 0 : event.startThreadId()) << ", \"ts\": "
          << compat::profiler_event_start_us(event) << ", \"dur\": " << compat::profiler_event_duration_us(event);
      if (event.hasShapes()) {
        out << ", \"args\": {\"Input Dims\": [";
        bool first_shape = true;
        for (const auto& shape : event.shapes()) {
          out << (first_shape ? "" : ", ") << "[";
          for (std::size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
          out << "]";
          first_shape = false;
        }
        out << "]}";
      }
      out << "}";
      first = false;
    }
    out << "\n]}\n";
    out.flush();
    if (!out) throw std::runtime_error("volt: writing the profiler trace " + path.string() + " failed");
  }
  std::filesystem::rename(temporary, path);
}

}  // namespace detail

VOLT_INLINE PyTorchProfiler::PyTorchProfiler(PyTorchProfilerOptions options)
    : Profiler(options.dirpath, options.filename), options_(std::move(options)),
      annotations_(std::make_unique<Annotations>()) {
  static const std::set<std::string, std::less<>> keys{"cpu_time", "cuda_time", "cpu_time_total", "cuda_time_total",
                                                       "count"};
  if (keys.find(options_.sort_by_key) == keys.end()) {
    throw std::invalid_argument("Found sort_by_key: " + options_.sort_by_key +
                                ". Should be within {'count', 'cpu_time', 'cpu_time_total', 'cuda_time', "
                                "'cuda_time_total'} (volt's PyTorchProfiler has no memory columns).");
  }
  const auto& s = options_.schedule;
  if (s.active < 1 || s.wait < 0 || s.warmup < 0 || s.repeat < 0) {
    throw std::invalid_argument("volt: PyTorchProfiler's schedule needs active >= 1 and wait, warmup, repeat >= 0; "
                                "got wait=" + std::to_string(s.wait) + ", warmup=" + std::to_string(s.warmup) +
                                ", active=" + std::to_string(s.active) + ", repeat=" + std::to_string(s.repeat));
  }
}

VOLT_INLINE PyTorchProfiler::~PyTorchProfiler() {
  try {
    annotations_->open.clear();
    if (recording_) {
      (void)torch::autograd::profiler::disableProfiler();
    } else if (prepared_) {
      discard_prepared();
    }
  } catch (...) {
    // nothing to report from a destructor
  }
}

VOLT_INLINE PyTorchProfiler::Phase PyTorchProfiler::phase(std::int64_t step) const {
  const auto& s = options_.schedule;
  const std::int64_t length = s.wait + s.warmup + s.active;
  if (s.repeat > 0 && step >= length * s.repeat) return Phase::none;
  const std::int64_t at = step % length;
  if (at < s.wait) return Phase::none;
  return at < s.wait + s.warmup ? Phase::warmup : Phase::record;
}

VOLT_INLINE std::int64_t PyTorchProfiler::cycle(std::int64_t step) const {
  const auto& s = options_.schedule;
  return step / (s.wait + s.warmup + s.active);
}

VOLT_INLINE void PyTorchProfiler::enter(std::int64_t step) {
  namespace P = torch::autograd::profiler;
  namespace I = torch::profiler::impl;
  const Phase next = phase(step);
  if (next == Phase::none) return;
  if (recording_) return;
  const I::ProfilerConfig config(I::ProfilerState::KINETO, options_.record_shapes, options_.profile_memory);
  std::set<I::ActivityType> activities{I::ActivityType::CPU};
  if (torch::cuda::is_available()) activities.insert(I::ActivityType::CUDA);
  if (!prepared_) {
    P::prepareProfiler(config, activities);
    prepared_ = true;
  }
  if (next == Phase::record) {
    P::enableProfiler(config, activities);
    recording_ = true;
  }
}

VOLT_INLINE void PyTorchProfiler::discard_prepared() {
  namespace P = torch::autograd::profiler;
  namespace I = torch::profiler::impl;
  const I::ProfilerConfig config(I::ProfilerState::KINETO, options_.record_shapes, options_.profile_memory);
  std::set<I::ActivityType> activities{I::ActivityType::CPU};
  if (torch::cuda::is_available()) activities.insert(I::ActivityType::CUDA);
  prepared_ = false;
  P::enableProfiler(config, activities);
  (void)P::disableProfiler();
}

VOLT_INLINE void PyTorchProfiler::finish_window(std::string_view action) {
  annotations_->open.clear();
  auto result = torch::autograd::profiler::disableProfiler();
  recording_ = false;
  prepared_ = false;
  ++windows_;
  for (const auto& event : result->events()) {
    const std::string name = event.name();
    if (name == "[memory]") continue;
    auto& row = operators_[name];
    const double duration = compat::profiler_event_duration_us(event);
    if (event.deviceType() == c10::DeviceType::CPU) {
      ++row.count;
      row.cpu_time_total_us += duration;
    } else {
      row.device_time_total_us += duration;
    }
  }
  if (!options_.export_to_chrome) return;
  if (dirpath().empty()) {
    log::warn("The PyTorchProfiler failed to export trace as `dirpath` is None");
    return;
  }
  std::error_code error;
  std::filesystem::create_directories(dirpath(), error);
  const auto path = dirpath() / (prepare_filename(action, "") + "." + std::to_string(windows_) + ".pt.trace.json");
  try {
    result->save(path.string());
  } catch (const std::exception&) {
    // Debian's 1.13 is built without Kineto: "Saving a trace requires ... Kineto support"; volt writes it
  }
  if (!std::filesystem::exists(path, error) || std::filesystem::file_size(path, error) == 0) {
    detail::write_chrome_trace(*result, path);  // this LibTorch has no Kineto: its save() wrote nothing
  }
  traces_.push_back(path);
}

VOLT_INLINE void PyTorchProfiler::step(std::string_view action) {
  const std::int64_t done = step_++;
  if (recording_ && (phase(step_) != Phase::record || cycle(step_) != cycle(done))) finish_window(action);
  enter(step_);
}

VOLT_INLINE void PyTorchProfiler::setup(std::string_view stage, std::optional<int> local_rank,
                                        const std::filesystem::path& log_dir) {
  Profiler::setup(stage, local_rank, log_dir);
  if (stage == "fit") {
    step_function_ = "training_step";
  } else if (stage == "validate") {
    step_function_ = "validation_step";
  } else {
    step_function_ = std::string(stage) + "_step";
  }
  step_ = 0;
  enter(0);
}

VOLT_INLINE void PyTorchProfiler::start(std::string_view action) {
  if (!recording_) return;
  auto record = std::make_unique<at::RecordFunction>(at::RecordScope::USER_SCOPE);
  if (record->isActive()) record->before(std::string(action));
  annotations_->open.insert_or_assign(std::string(action), std::move(record));
}

VOLT_INLINE void PyTorchProfiler::stop(std::string_view action) {
  if (const auto open = annotations_->open.find(action); open != annotations_->open.end()) {
    annotations_->open.erase(open);
  }
  const bool is_step = !step_function_.empty() && action.size() >= step_function_.size() &&
                       action.substr(action.size() - step_function_.size()) == step_function_;
  if (is_step) step(action);
}

VOLT_INLINE void PyTorchProfiler::teardown() {
  if (recording_) {
    finish_window(step_function_);
  } else if (prepared_) {
    discard_prepared();
  }
  Profiler::teardown();
}

VOLT_INLINE std::string PyTorchProfiler::summary() {
  if (recording_) finish_window(step_function_);
  if (operators_.empty()) return "";
  std::vector<std::pair<std::string, OperatorStats>> rows(operators_.begin(), operators_.end());
  const auto& key = options_.sort_by_key;
  auto value = [&](const OperatorStats& s) {
    if (key == "count") return static_cast<double>(s.count);
    if (key == "cpu_time") return s.count ? s.cpu_time_total_us / static_cast<double>(s.count) : 0.0;
    if (key == "cuda_time") return s.count ? s.device_time_total_us / static_cast<double>(s.count) : 0.0;
    if (key == "cuda_time_total") return s.device_time_total_us;
    return s.cpu_time_total_us;
  };
  std::stable_sort(rows.begin(), rows.end(), [&](const auto& a, const auto& b) { return value(a.second) > value(b.second); });
  if (options_.row_limit >= 0 && rows.size() > static_cast<std::size_t>(options_.row_limit)) {
    rows.resize(static_cast<std::size_t>(options_.row_limit));
  }
  std::size_t width = 4;
  for (const auto& row : rows) width = std::max(width, row.first.size());
  auto cell = [](const std::string& text, std::size_t w) { return std::string(w > text.size() ? w - text.size() : 0, ' ') + text; };
  auto time = [](double us) {
    char buffer[32];
    if (us >= 1e6) {
      std::snprintf(buffer, sizeof(buffer), "%.3fs", us / 1e6);
    } else if (us >= 1e3) {
      std::snprintf(buffer, sizeof(buffer), "%.3fms", us / 1e3);
    } else {
      std::snprintf(buffer, sizeof(buffer), "%.3fus", us);
    }
    return std::string(buffer);
  };
  const std::string line = std::string(width, '-') + "  " + std::string(4 * 15 + 4 * 2 + 10, '-') + "\n";
  std::string table = line;
  table += detail::pad_right("Name", width) + "  " + cell("CPU total", 15) + "  " + cell("CPU time avg", 15) + "  " +
           cell("CUDA total", 15) + "  " + cell("CUDA time avg", 15) + "  " + cell("# of Calls", 10) + "\n" + line;
  for (const auto& [name, s] : rows) {
    const double calls = s.count ? static_cast<double>(s.count) : 1.0;
    table += detail::pad_right(name, width) + "  " + cell(time(s.cpu_time_total_us), 15) + "  " +
             cell(time(s.cpu_time_total_us / calls), 15) + "  " + cell(time(s.device_time_total_us), 15) + "  " +
             cell(time(s.device_time_total_us / calls), 15) + "  " + cell(std::to_string(s.count), 10) + "\n";
  }
  table += line;
  std::string upper = stage();
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::string header = (upper.empty() ? "" : upper + " ") + "Profiler Report\nProfile stats for: records";
  if (local_rank()) header += " rank: " + std::to_string(*local_rank());
  return header + "\n" + table;
}

}  // namespace volt

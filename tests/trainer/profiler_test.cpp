// TrainerOptions::profiler: SimpleProfiler's report (every hook that ran, with its number of calls, in Lightning's
// layout, recorded from Lightning 2.6.6 with tests/oracle/record_profiler.py) and PyTorchProfiler's Chrome trace
// (valid JSON holding the operators of the schedule's active steps).
#include <torch/torch.h>

#include <doctest/doctest.h>

#include "test_common.hpp"
#include "trainer/trainer_fixtures.hpp"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

using volt_test::quiet_options;
using volt_test::TempDir;

namespace {

struct ProfiledNet : volt_test::SgdRegressor {
  int fit_starts = 0;
  void on_fit_start() { ++fit_starts; }
  void on_train_batch_end() {}
  void on_validation_epoch_end() {}
};

struct HookCounter {
  int batch_starts = 0;
  void on_train_batch_start(volt::TrainerState&, std::int64_t) { ++batch_starts; }
  void on_train_epoch_end(volt::TrainerState&) {}
};

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The number in the "Num calls" column of `action`'s row in an extended SimpleProfiler report (-1: no row).
int calls_of(const std::string& report, const std::string& action) {
  std::istringstream lines(report);
  for (std::string line; std::getline(lines, line);) {
    const std::string start = "|  " + action;
    if (line.rfind(start, 0) != 0 || (line.size() > start.size() && line[start.size()] != ' ' &&
                                      line[start.size()] != '\t')) {
      continue;
    }
    std::vector<std::string> cells;
    std::string cell;
    std::istringstream parts(line);
    while (std::getline(parts, cell, '|')) cells.push_back(cell);
    return std::stoi(cells.at(3));
  }
  return -1;
}

// A minimal JSON validator (RFC 8259 grammar, no semantic checks): true when `text` is one JSON value.
struct JsonCheck {
  const std::string& s;
  std::size_t i = 0;
  void ws() {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  }
  bool literal(const char* word) {
    const std::string w(word);
    if (s.compare(i, w.size(), w) != 0) return false;
    i += w.size();
    return true;
  }
  bool string() {
    if (s[i] != '"') return false;
    for (++i; i < s.size(); ++i) {
      if (s[i] == '\\') {
        ++i;
      } else if (s[i] == '"') {
        ++i;
        return true;
      } else if (static_cast<unsigned char>(s[i]) < 0x20) {
        return false;
      }
    }
    return false;
  }
  bool number() {
    const std::size_t begin = i;
    if (s[i] == '-') ++i;
    while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.' || s[i] == 'e' ||
                            s[i] == 'E' || s[i] == '+' || s[i] == '-')) {
      ++i;
    }
    return i > begin && std::isdigit(static_cast<unsigned char>(s[i - 1]));
  }
  bool value() {
    ws();
    if (i >= s.size()) return false;
    bool ok = false;
    if (s[i] == '{') {
      ++i;
      ws();
      if (s[i] == '}') {
        ++i;
        ok = true;
      } else {
        for (;;) {
          ws();
          if (!string()) return false;
          ws();
          if (s[i++] != ':' || !value()) return false;
          ws();
          if (s[i] == ',') {
            ++i;
            continue;
          }
          if (s[i++] != '}') return false;
          ok = true;
          break;
        }
      }
    } else if (s[i] == '[') {
      ++i;
      ws();
      if (s[i] == ']') {
        ++i;
        ok = true;
      } else {
        for (;;) {
          if (!value()) return false;
          ws();
          if (s[i] == ',') {
            ++i;
            continue;
          }
          if (s[i++] != ']') return false;
          ok = true;
          break;
        }
      }
    } else if (s[i] == '"') {
      ok = string();
    } else if (s[i] == 't') {
      ok = literal("true");
    } else if (s[i] == 'f') {
      ok = literal("false");
    } else if (s[i] == 'n') {
      ok = literal("null");
    } else {
      ok = number();
    }
    ws();
    return ok;
  }
  bool whole() { return value() && i == s.size(); }
};

}  // namespace

TEST_CASE("profiler=\"simple\" reports every hook that ran with its number of calls, in Lightning's layout") {
  TempDir dir;
  auto profiler = std::make_shared<volt::SimpleProfiler>(volt::SimpleProfilerOptions{.filename = "perf"});
  auto options = quiet_options(dir);
  options.max_epochs = 2;
  options.num_sanity_val_steps = 0;
  options.enable_checkpointing = true;
  options.profiler = profiler;
  volt::Trainer<> trainer(options, HookCounter{});
  auto model = std::make_shared<ProfiledNet>();
  trainer.fit(model, volt_test::make_batches(3), volt_test::make_batches(2));

  // Lightning: `<dirpath or log_dir>/fit-<filename>.txt` (recorded: fit-perf.txt under the log_dir).
  const auto file = dir.path / "fit-perf.txt";
  REQUIRE(std::filesystem::exists(file));
  const std::string report = read_text(file);
  CHECK(report.rfind("FIT Profiler Report\n\n---", 0) == 0);
  // The header row and the separator exactly as Lightning writes them for this key width.
  const auto actions = profiler->actions();
  std::size_t key = 0;
  for (const auto& a : actions) key = std::max(key, a.size());
  const std::string header = "|  " + std::string("Action") + std::string(key - 6, ' ') +
                             "\t|  Mean duration (s)\t|  Num calls      \t|  Total time (s) \t|  Percentage %   \t|";
  CHECK(report.find("\n" + header + "\n") != std::string::npos);
  CHECK(report.find("|  Total" + std::string(key - 5, ' ') + "\t|  -              \t|") != std::string::npos);

  CHECK(calls_of(report, "[LightningModule]ProfiledNet.training_step") == 6);
  CHECK(calls_of(report, "[LightningModule]ProfiledNet.validation_step") == 4);
  CHECK(calls_of(report, "[LightningModule]ProfiledNet.on_fit_start") == 1);
  CHECK(calls_of(report, "[LightningModule]ProfiledNet.on_train_batch_end") == 6);
  CHECK(calls_of(report, "[LightningModule]ProfiledNet.on_validation_epoch_end") == 2);
  CHECK(calls_of(report, "[Callback]HookCounter.on_train_batch_start") == 6);
  CHECK(calls_of(report, "[Callback]HookCounter.on_train_epoch_end") == 2);
  CHECK(calls_of(report, "run_training_epoch") == 2);
  CHECK(calls_of(report, "run_training_batch") == 6);
  CHECK(calls_of(report, "[_TrainingEpochLoop].train_dataloader_next") == 6);
  CHECK(model->fit_starts == 1);
  // A hook the model does not define is not an action.
  CHECK(calls_of(report, "[LightningModule]ProfiledNet.on_train_start") == -1);
  CHECK(calls_of(report, "[_EvaluationLoop].val_next") == 4);
  CHECK(calls_of(report, "save_checkpoint") == 2);  // the default ModelCheckpoint, once per epoch
  CHECK(calls_of(report, "[Callback]ModelCheckpoint.on_validation_end") == 2);
  // Every row's count matches the recorded durations.
  for (const auto& action : actions) {
    CHECK_MESSAGE(calls_of(report, action) == static_cast<int>(profiler->durations(action).size()), action);
  }
}

TEST_CASE("validate and test are profiled as their own stages, each report in its own file") {
  TempDir dir;
  auto profiler = std::make_shared<volt::SimpleProfiler>(volt::SimpleProfilerOptions{.dirpath = dir.path / "prof",
                                                                                      .filename = "run"});
  auto options = quiet_options(dir);
  options.profiler = profiler;
  volt::Trainer<> trainer(options);
  auto model = std::make_shared<ProfiledNet>();
  trainer.validate(model, volt_test::make_batches(3));
  const auto file = dir.path / "prof" / "validate-run.txt";
  REQUIRE(std::filesystem::exists(file));
  const std::string report = read_text(file);
  CHECK(report.rfind("VALIDATE Profiler Report\n", 0) == 0);
  CHECK(calls_of(report, "[LightningModule]ProfiledNet.validation_step") == 3);
  CHECK(calls_of(report, "[_EvaluationLoop].val_next") == 3);
  CHECK(calls_of(report, "[LightningModule]ProfiledNet.on_validation_epoch_end") == 1);
  CHECK(profiler->stage() == "validate");
}

TEST_CASE("SimpleProfiler's summary has Lightning's layout for recorded durations") {
  volt::SimpleProfiler profiler({.extended = false});
  profiler.start("a");
  profiler.stop("a");
  const std::string text = profiler.summary();
  // Lightning 2.6.6 (recorded): the key column is the longest action's width, a tab, then columns of 15.
  CHECK(text.rfind("Profiler Report\n\n", 0) == 0);
  CHECK(text.find("\n|  Action\t|  Mean duration (s)\t|  Total time (s) \t|\n") != std::string::npos);
  // The separator is as long as the header with its tabs expanded, plus one (Lightning counts the newline).
  CHECK(text.find("\n" + std::string(66, '-') + "\n") != std::string::npos);
  CHECK_THROWS_WITH_AS(profiler.stop("b"), "Attempting to stop recording an action (b) which was never started.",
                       std::invalid_argument);
  profiler.start("c");
  CHECK_THROWS_WITH_AS(profiler.start("c"), "Attempted to start c which has already started.", std::invalid_argument);
  CHECK(volt::detail::python_g5(7.22083e-05) == "7.2208e-05");
  CHECK(volt::detail::python_g5(2.0) == "2.0");
  CHECK(volt::detail::python_g5(34.22912) == "34.229");
  CHECK(volt::detail::python_g5(123456.0) == "1.2346e+05");
}

TEST_CASE("a profiler string other than Lightning's is refused with its message") {
  TempDir dir;
  auto options = quiet_options(dir);
  options.profiler = "foo";
  CHECK_THROWS_WITH_AS(volt::Trainer<>{options},
                       "When passing string value for the `profiler` parameter of `Trainer`, it can only be one of "
                       "['simple', 'advanced', 'pytorch', 'xla']",
                       volt::MisconfigurationError);
  options.profiler = "Simple";  // Lightning lowercases the name
  CHECK_NOTHROW(volt::Trainer<>{options});
}

TEST_CASE("profiler=\"pytorch\" writes a Chrome trace of the active steps that parses as JSON and holds aten ops") {
  TempDir dir;
  auto profiler = std::make_shared<volt::PyTorchProfiler>(volt::PyTorchProfilerOptions{
      .filename = "ops", .schedule = {.wait = 1, .warmup = 1, .active = 2, .repeat = 1}, .record_shapes = true});
  auto options = quiet_options(dir);
  options.profiler = profiler;
  volt::Trainer<> trainer(options);
  auto model = std::make_shared<volt_test::SgdRegressor>();
  trainer.fit(model, volt_test::make_batches(6));
  REQUIRE(profiler->traces().size() == 1);
  const auto& trace = profiler->traces().front();
  CHECK(trace.parent_path() == dir.path);
  CHECK(trace.filename().string().rfind("fit-ops-", 0) == 0);
  const std::string text = read_text(trace);
  CHECK(JsonCheck{text}.whole());
  CHECK(text.find("\"traceEvents\"") != std::string::npos);
  CHECK(text.find("\"aten::addmm\"") != std::string::npos);
  CHECK(text.find("training_step") != std::string::npos);  // the Trainer's actions as user annotations
  // Two active steps: two training steps' forward matmuls (each a Linear: one addmm).
  CHECK(profiler->operators().at("aten::addmm").count == 2);
  const std::string report = read_text(dir.path / "fit-ops.txt");
  CHECK(report.find("Profile stats for: records") != std::string::npos);
  CHECK(report.find("aten::addmm") != std::string::npos);
  // The table's separators are as wide as its rows.
  std::istringstream lines(report);
  std::vector<std::string> table;
  for (std::string line; std::getline(lines, line);) table.push_back(line);
  REQUIRE(table.size() > 5);
  CHECK(table[3].rfind("Name", 0) == 0);
  CHECK(table[2].size() == table[3].size());
  CHECK(table[4].size() == table[5].size());
}

TEST_CASE("PyTorchProfiler refuses an unknown sort key and a schedule without active steps") {
  CHECK_THROWS_AS(volt::PyTorchProfiler{volt::PyTorchProfilerOptions{.sort_by_key = "flops"}}, std::invalid_argument);
  CHECK_THROWS_AS(volt::PyTorchProfiler{volt::PyTorchProfilerOptions{.schedule = {.active = 0}}}, std::invalid_argument);
}

TEST_CASE("CUDA: profiler=\"pytorch\" on the GPU records the steps' CUDA kernels in the Chrome trace") {
  if (!torch::cuda::is_available()) {
    MESSAGE("skipped: no CUDA device (torch::cuda::is_available() is false)");
    return;
  }
  TempDir dir;
  auto profiler = std::make_shared<volt::PyTorchProfiler>(volt::PyTorchProfilerOptions{
      .filename = "gpu", .schedule = {.wait = 1, .warmup = 1, .active = 2, .repeat = 1}});
  auto options = quiet_options(dir);
  options.profiler = profiler;
  volt::Trainer<volt::CUDA> trainer(options);
  auto model = std::make_shared<volt_test::SgdRegressor>();
  trainer.fit(model, volt_test::make_batches(6));
  REQUIRE(profiler->traces().size() == 1);
  const std::string text = read_text(profiler->traces().front());
  CHECK(JsonCheck{text}.whole());
  CHECK(text.find("aten::addmm") != std::string::npos);
  // Kineto writes the device's kernels with the category "kernel" (a LibTorch without Kineto has none to write).
  CHECK(text.find("\"kernel\"") != std::string::npos);
  double device_time = 0;
  for (const auto& [name, stats] : profiler->operators()) device_time += stats.device_time_total_us;
  CHECK(device_time > 0);
}

TEST_CASE("PyTorchProfiler: a fit that ends in the warmup writes no trace, reports nothing and stops LibTorch's profiler") {
  TempDir dir;
  auto profiler = std::make_shared<volt::PyTorchProfiler>(volt::PyTorchProfilerOptions{.filename = "short"});
  auto options = quiet_options(dir);
  options.profiler = profiler;
  volt::Trainer<> trainer(options);
  auto model = std::make_shared<volt_test::SgdRegressor>();
  // Lightning's default schedule (wait 1, warmup 1, active 3): the schedule steps when a training_step ends, so
  // one batch ends the fit in the warmup (LibTorch's profiler prepared, not recording).
  trainer.fit(model, volt_test::make_batches(1));
  CHECK(profiler->traces().empty());
  CHECK(profiler->operators().empty());
  CHECK_FALSE(std::filesystem::exists(dir.path / "fit-short.txt"));
  // LibTorch's profiler is off again: a second profiler can record.
  auto second = std::make_shared<volt::PyTorchProfiler>(
      volt::PyTorchProfilerOptions{.schedule = {.wait = 0, .warmup = 0, .active = 1, .repeat = 1}});
  options.profiler = second;
  volt::Trainer<> again(options);
  again.fit(model, volt_test::make_batches(2));
  CHECK(second->traces().size() == 1);
  CHECK(second->operators().count("aten::addmm") == 1);
}

// Per-step profile of the training step: what volt's Trainer does per optimizer step beyond a hand-written
// LibTorch loop, counted with LibTorch's profiler (Kineto) and the CUDA caching allocator's statistics.
//
//   bench_step_profile [--device cuda|cpu] [--model mlp|simplecnn|resnet18] [--batch 128] [--warmup 30] [--steps 100]
//
// Rows: the hand-written loop (zero_grad, forward, backward, LibTorch's Adam), the same loop with volt's
// optimizer step (volt::optim::step: fused Adam), volt's Trainer (no logger, progress bar or checkpointing, as
// the four-way benchmark), and on CUDA volt's Trainer with cuda_graphs. For each row, per optimizer step:
// ATen operators called, CUDA runtime calls (kernel launches, graph launches, synchronisations), device
// activities (kernels, copies, memsets), device allocations through the caching allocator, and the host time
// of one step (wall time with the profiler off, after synchronising).
// Prints a markdown table on stdout.
#include <volt/volt.hpp>

#include "task.hpp"

#include <torch/csrc/autograd/profiler_kineto.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using Batches = std::vector<torch::data::Example<>>;
using volt_bench::input_shape;
using volt_bench::Task;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Settings {
  std::string device = "cuda", model = "mlp";
  std::int64_t batch = 128, warmup = 30, steps = 100;
};

void synchronize(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize();
}

double allocations(const torch::Device& device) {
  if (!device.is_cuda()) return 0;
  return volt::compat::cuda_memory_stats(device.index()).at("allocation.all.allocated");
}

/// What one row counted over its profiled steps.
struct Counts {
  double aten_ops = 0, launches = 0, graph_launches = 0, syncs = 0, device_activities = 0, device_allocations = 0;
  double host_us = 0;
};

/// Starts and stops LibTorch's profiler around the steps of a row, and reads the events.
class Profile {
 public:
  explicit Profile(const torch::Device& device) : device_(device) {
    activities_.insert(torch::profiler::impl::ActivityType::CPU);
    if (device.is_cuda()) activities_.insert(torch::profiler::impl::ActivityType::CUDA);
    torch::autograd::profiler::prepareProfiler(config(), activities_);
  }
  void start() {
    synchronize(device_);
    allocations_before_ = allocations(device_);
    torch::autograd::profiler::enableProfiler(config(), activities_);
  }
  Counts stop(std::int64_t steps) {
    synchronize(device_);
    const double allocated = allocations(device_) - allocations_before_;
    const auto result = torch::autograd::profiler::disableProfiler();
    Counts counts;
    for (const auto& event : result->events()) {
      const std::string name = event.name();
      if (event.deviceType() == c10::DeviceType::CUDA) {
        ++counts.device_activities;
      } else if (name.rfind("aten::", 0) == 0) {
        ++counts.aten_ops;
      } else if (name.rfind("cuda", 0) == 0) {
        if (name.find("GraphLaunch") != std::string::npos) ++counts.graph_launches;
        else if (name.find("LaunchKernel") != std::string::npos || name.find("LaunchCooperative") != std::string::npos)
          ++counts.launches;
        else if (name.find("Synchronize") != std::string::npos) ++counts.syncs;
      }
    }
    const double n = static_cast<double>(steps);
    counts.aten_ops /= n, counts.launches /= n, counts.graph_launches /= n, counts.syncs /= n;
    counts.device_activities /= n;
    counts.device_allocations = allocated / n;
    return counts;
  }

 private:
  static torch::profiler::impl::ProfilerConfig config() {
    return torch::profiler::impl::ProfilerConfig(torch::profiler::impl::ProfilerState::KINETO);
  }
  torch::Device device_;
  std::set<torch::profiler::impl::ActivityType> activities_;
  double allocations_before_ = 0;
};

Batches make_batches(const Settings& settings, const torch::Device& device) {
  torch::manual_seed(1234);
  Batches batches;
  const auto shape = input_shape(settings.model, settings.batch);
  for (int i = 0; i < 8; ++i) {
    batches.emplace_back(torch::randn(shape).to(device), torch::randint(0, 10, {settings.batch}).to(device));
  }
  return batches;
}

/// A hand-written loop; `volt_step` replaces optimizer.step() by volt::optim::step(optimizer).
Counts hand_row(const Settings& settings, const Batches& batches, const torch::Device& device, bool volt_step,
                bool profile) {
  torch::manual_seed(0);
  auto model = std::make_shared<Task>(settings.model);
  model->to(device);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(1e-3));
  std::optional<Profile> profiler;
  if (profile) profiler.emplace(device);
  double start = 0;
  Counts counts;
  const auto total = settings.warmup + settings.steps;
  for (std::int64_t step = 0; step < total; ++step) {
    if (step == settings.warmup) {
      if (profiler) profiler->start();
      synchronize(device);
      start = now_seconds();
    }
    const auto& batch = batches[static_cast<std::size_t>(step) % batches.size()];
    optimizer.zero_grad();
    model->training_step(batch, step).backward();
    if (volt_step) {
      volt::optim::step(optimizer);
    } else {
      optimizer.step();
    }
  }
  synchronize(device);
  const double seconds = now_seconds() - start;
  if (profiler) counts = profiler->stop(settings.steps);
  counts.host_us = seconds / static_cast<double>(settings.steps) * 1e6;
  return counts;
}

/// Starts the profiler (or the clock) when global_step reaches `warmup`, stops at `warmup + steps`.
struct ProfileWindow {
  std::int64_t warmup, steps;
  std::shared_ptr<std::function<void()>> on_start, on_stop;
  void on_train_batch_end(volt::TrainerState& state, const torch::Tensor&, std::int64_t) {
    if (state.global_step == warmup) (*on_start)();
    if (state.global_step == warmup + steps) (*on_stop)();
  }
};

template <class Accelerator>
Counts trainer_row(const Settings& settings, const Batches& batches, const torch::Device& device, bool graphs,
                   bool profile) {
  torch::manual_seed(0);
  auto model = std::make_shared<Task>(settings.model);
  std::optional<Profile> profiler;
  if (profile) profiler.emplace(device);
  double start = 0, seconds = 0;
  Counts counts;
  auto on_start = std::make_shared<std::function<void()>>([&] {
    if (profiler) profiler->start();
    synchronize(device);
    start = now_seconds();
  });
  auto on_stop = std::make_shared<std::function<void()>>([&] {
    synchronize(device);
    seconds = now_seconds() - start;
    if (profiler) counts = profiler->stop(settings.steps);
  });
  const auto total = settings.warmup + settings.steps;
  Batches epoch;
  for (std::int64_t i = 0; i <= total; ++i) epoch.push_back(batches[static_cast<std::size_t>(i) % batches.size()]);
  volt::Trainer<Accelerator> trainer({.max_steps = total,
                                      .enable_progress_bar = false,
                                      .enable_checkpointing = false,
                                      .enable_model_summary = false,
                                      .logger = false,
                                      .cuda_graphs = graphs},
                                     ProfileWindow{settings.warmup, settings.steps, on_start, on_stop});
  trainer.fit(model, epoch);
  if (graphs && trainer.cuda_graph_replays() < settings.steps) throw std::runtime_error("the graph was not replayed");
  counts.host_us = seconds / static_cast<double>(settings.steps) * 1e6;
  return counts;
}

Settings parse(int argc, char** argv) {
  Settings settings;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--device") settings.device = value;
    else if (flag == "--model") settings.model = value;
    else if (flag == "--batch") settings.batch = std::stoll(value);
    else if (flag == "--warmup") settings.warmup = std::stoll(value);
    else if (flag == "--steps") settings.steps = std::stoll(value);
    else throw std::invalid_argument("unknown flag " + flag);
  }
  if (settings.device != "cpu" && settings.device != "cuda") throw std::invalid_argument("--device is cpu or cuda");
  if (settings.warmup < 5 || settings.steps < 1) throw std::invalid_argument("--warmup >= 5 and --steps >= 1");
  return settings;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const auto settings = parse(argc, argv);
    const bool cuda = settings.device == "cuda";
    if (cuda && !torch::cuda::is_available()) throw std::runtime_error("CUDA requested but not available");
    const torch::Device device = cuda ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
    volt::log::set_sink([](volt::log::Level, std::string_view) {});
    const auto batches = make_batches(settings, device);
    struct Row {
      const char* name;
      std::function<Counts(bool)> run;
    };
    std::vector<Row> rows = {
        {"hand-written loop, LibTorch's Adam", [&](bool p) { return hand_row(settings, batches, device, false, p); }},
        {"hand-written loop, volt::optim::step", [&](bool p) { return hand_row(settings, batches, device, true, p); }},
    };
    if (cuda) {
      rows.push_back({"volt Trainer<CUDA>", [&](bool p) { return trainer_row<volt::CUDA>(settings, batches, device, false, p); }});
      rows.push_back({"volt Trainer<CUDA>, cuda_graphs", [&](bool p) {
                        return trainer_row<volt::CUDA>(settings, batches, device, true, p);
                      }});
    } else {
      rows.push_back({"volt Trainer<CPU>", [&](bool p) { return trainer_row<volt::CPU>(settings, batches, device, false, p); }});
    }
    std::printf("# Per-step profile: %s, batch %lld, %s, LibTorch %s\n\n", settings.model.c_str(),
                static_cast<long long>(settings.batch), settings.device.c_str(), TORCH_VERSION);
    std::printf("Per optimizer step, averaged over %lld steps after %lld warm-up steps. Host time: wall time per "
                "step with the profiler off (median of 3 runs).\n\n",
                static_cast<long long>(settings.steps), static_cast<long long>(settings.warmup));
    std::printf("| loop | host us/step | ATen ops | kernel launches | graph launches | syncs | device activities | "
                "device allocations |\n|---|---|---|---|---|---|---|---|\n");
    for (const auto& row : rows) {
      std::vector<double> times;
      for (int repeat = 0; repeat < 3; ++repeat) times.push_back(row.run(false).host_us);
      std::sort(times.begin(), times.end());
      const Counts counts = row.run(true);
      std::printf("| %s | %.1f | %.1f | %.1f | %.2f | %.2f | %.1f | %.1f |\n", row.name, times[1], counts.aten_ops,
                  counts.launches, counts.graph_launches, counts.syncs, counts.device_activities,
                  counts.device_allocations);
      std::fflush(stdout);
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_step_profile: %s\n", error.what());
    return 1;
  }
  return 0;
}

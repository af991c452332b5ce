// Where the device time of one training step goes: volt's Trainer on CUDA, its kernels recorded with LibTorch's
// profiler (Kineto, CPU and CUDA activities) and summed per kind of kernel. benchmarks/python/kernel_breakdown.py
// prints the same table for PyTorch eager and torch.compile on the same models and data.
//
//   bench_kernel_breakdown [--model resnet18-cl|resnet18-fused|gpt|gpt-fused] [--precision fp32|bf16|fp32-high]
//                          [--batch N] [--warmup 10] [--steps 5] [--graphs 0|1] [--top 15]
//
// One fit() of warmup + 2 * steps optimizer steps: `warmup` steps untimed, then `steps` steps timed between two
// device synchronisations with the profiler off (the wall time per step), then `steps` steps profiled (the
// profiler starts at the batch start after a synchronisation and stops at the last batch end after another).
// The model is volt_bench::Task (task.hpp, seed 0); the data are 8 batches made on the CPU from
// torch::manual_seed(1234) as bench_four_way makes them (randn images and randint labels, token ids for the GPT),
// moved to the device once. The Trainer gets `.benchmark = true`, `.memory_format = channels_last` for the
// channels-last models, `.cuda_graphs` from --graphs; no logger, progress bar, checkpointing or model summary.
// Batch: 256 for the ResNets, 64 for the GPT unless given.
//
// Device time: the durations of the profiler's CUDA events (kernels, copies, memsets; the user annotations,
// which span the kernels of a record_function scope, are left out), summed per category and divided by
// `steps`. A kernel's category is the first pattern its name matches (case-insensitive):
//
//   layer norm                       layer_norm|layernorm|gammabeta   (volt's kernels: volt_layer_norm_*)
//   batch norm                       batch_norm|batchnorm|bn_fw|bn_bw|bn_|welford
//   convolution / matmul             conv|gemm|xmma|cutlass|implicit|wgrad|dgrad|fprop|cublas|sm90_|sm80_|flash|
//                                    fmha|attention|nvjet|sdpa   (nvjet: cuBLAS's GEMM kernels on Hopper and later)
//   optimizer                        adam|multi_tensor|foreach|fused_adam
//   cross-entropy / log-softmax      cross_entropy|log_softmax|nll_loss   (volt's: volt_cross_entropy_*)
//   GELU                             gelu
//   embedding                        embedding|radix|sort|index_put|scatter   (the backward's sort and scatter)
//   Triton (Inductor-fused)          ^triton_
//   copy / memset                    memcpy|memset|copy
//   elementwise / reduction / other  everything else
//
// Inductor names its kernels after the operators they fuse, so a Triton kernel with layer_norm, batch_norm or
// convolution in its name counts there. Prints markdown: the categories, the total device time against the wall
// time, and the `top` (15) kernels with the most device time per step.
#include <volt/volt.hpp>

#include "task.hpp"

#include <torch/csrc/autograd/profiler_kineto.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

using Batches = std::vector<torch::data::Example<>>;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Settings {
  std::string model = "resnet18-cl", precision = "fp32";
  std::int64_t batch = 0, warmup = 10, steps = 5, top = 15;
  bool graphs = false;
};

/// One kernel name's device time and calls over the profiled steps.
struct KernelTotal {
  double us = 0;
  std::int64_t calls = 0;
};

/// What the callback recorded: the two time marks of the timed steps and the profiled kernels by name.
struct Record {
  std::vector<double> marks;
  std::map<std::string, KernelTotal> kernels;
  bool profiled = false;
};

// libkineto::ActivityType's values for user annotations (CPU and GPU side), as LibTorch's Python binding compares
// them in _KinetoEvent.is_user_annotation(); the kineto header is not installed with every LibTorch.
constexpr std::uint8_t user_annotation = 1, gpu_user_annotation = 2;

/// LibTorch's profiler with CPU and CUDA activities, prepared and started together, as torch.profiler.profile()
/// does without a schedule (Kineto turns the device tracing on when it is prepared: preparing it before the timed
/// steps would slow them). stop() returns the CUDA events' durations by name.
class KernelProfiler {
 public:
  KernelProfiler() {
    activities_.insert(torch::profiler::impl::ActivityType::CPU);
    activities_.insert(torch::profiler::impl::ActivityType::CUDA);
  }
  void start() {
    torch::autograd::profiler::prepareProfiler(config(), activities_);
    torch::autograd::profiler::enableProfiler(config(), activities_);
  }
  std::map<std::string, KernelTotal> stop() {
    const auto result = torch::autograd::profiler::disableProfiler();
    std::map<std::string, KernelTotal> kernels;
    for (const auto& event : result->events()) {
      if (event.deviceType() != c10::DeviceType::CUDA) continue;
      if (event.activityType() == user_annotation || event.activityType() == gpu_user_annotation) continue;
      auto& total = kernels[event.name()];
      total.us += volt::compat::profiler_event_duration_us(event);
      ++total.calls;
    }
    return kernels;
  }

 private:
  static torch::profiler::impl::ProfilerConfig config() {
    return torch::profiler::impl::ProfilerConfig(torch::profiler::impl::ProfilerState::KINETO);
  }
  std::set<torch::profiler::impl::ActivityType> activities_;
};

/// Times steps (warmup, warmup + steps] and profiles steps (warmup + steps, warmup + 2 * steps], counted in
/// optimizer steps (global_step).
struct Window {
  std::int64_t warmup, steps;
  std::shared_ptr<KernelProfiler> profiler;
  std::shared_ptr<Record> record;
  void on_train_batch_start(volt::TrainerState& state, std::int64_t) {
    if (state.global_step != warmup + steps) return;
    torch::cuda::synchronize();
    profiler->start();
  }
  void on_train_batch_end(volt::TrainerState& state, const torch::Tensor&, std::int64_t) {
    if (state.global_step == warmup || state.global_step == warmup + steps) {
      torch::cuda::synchronize();
      record->marks.push_back(now_seconds());
    } else if (state.global_step == warmup + 2 * steps) {
      torch::cuda::synchronize();
      record->kernels = profiler->stop();
      record->profiled = true;
    }
  }
};

/// 8 batches as bench_four_way's make_data makes them (same seed, on the CPU, then moved to the device).
Batches make_batches(const Settings& settings, const torch::Device& device) {
  constexpr int count = 8;
  torch::manual_seed(1234);
  auto shape = volt_bench::input_shape(settings.model, settings.batch);
  shape.insert(shape.begin(), count);
  const auto longs = torch::TensorOptions().dtype(torch::kLong);
  const bool tokens = volt_bench::language_model(settings.model);
  const std::int64_t vocabulary = volt_bench::GptConfig{}.vocabulary;
  const auto inputs = tokens ? torch::randint(0, vocabulary, shape, longs) : torch::randn(shape);
  const auto targets = tokens ? torch::randint(0, vocabulary, shape, longs)
                              : torch::randint(0, 10, {count, settings.batch}, longs);
  Batches batches;
  for (int i = 0; i < count; ++i) batches.emplace_back(inputs[i].to(device), targets[i].to(device));
  return batches;
}

template <class Precision>
Record train(const Settings& settings, const Batches& distinct) {
  torch::manual_seed(0);
  auto model = std::make_shared<volt_bench::Task>(settings.model);
  const auto record = std::make_shared<Record>();
  const Window window{settings.warmup, settings.steps, std::make_shared<KernelProfiler>(), record};
  const std::int64_t total = settings.warmup + 2 * settings.steps;
  Batches epoch;
  for (std::int64_t i = 0; i <= total; ++i) epoch.push_back(distinct[static_cast<std::size_t>(i) % distinct.size()]);
  const auto format = volt_bench::channels_last_model(settings.model) ? volt::MemoryFormat::channels_last
                                                                       : volt::MemoryFormat::contiguous;
  // fp32-high: float32 matmuls on TF32 tensor cores, as the four-way benchmark's fp32-high rows.
  const volt::Float32MatmulPrecision matmul_precision = settings.precision == "fp32-high"
                                                            ? volt::Float32MatmulPrecision::Level::high
                                                            : volt::Float32MatmulPrecision::Level::highest;
  volt::Trainer<volt::CUDA, volt::SingleDevice, Precision> trainer({.max_epochs = -1,
                                                                    .max_steps = total,
                                                                    .num_sanity_val_steps = 0,
                                                                    .log_every_n_steps = 0,
                                                                    .benchmark = true,
                                                                    .float32_matmul_precision = matmul_precision,
                                                                    .memory_format = format,
                                                                    .enable_progress_bar = false,
                                                                    .enable_checkpointing = false,
                                                                    .enable_model_summary = false,
                                                                    .logger = false,
                                                                    .cuda_graphs = settings.graphs},
                                                                   window);
  trainer.fit(model, epoch);
  if (record->marks.size() != 2 || !record->profiled) {
    throw std::runtime_error("volt's Trainer stopped before the last profiled step");
  }
  if (settings.graphs && trainer.cuda_graph_replays() < 2 * settings.steps) {
    throw std::runtime_error("the CUDA graph replayed " + std::to_string(trainer.cuda_graph_replays()) + " times in " +
                             std::to_string(total) + " steps (fewer than the timed and profiled steps)");
  }
  return std::move(*record);
}

/// The categories with their patterns, in the order they are tried; a name no pattern matches is "other".
struct Category {
  const char* name;
  std::regex pattern;
};
constexpr const char* other_category = "elementwise / reduction / other";

std::vector<Category> categories() {
  const auto flags = std::regex::ECMAScript | std::regex::icase | std::regex::optimize;
  return {
      {"layer norm", std::regex("layer_norm|layernorm|gammabeta", flags)},
      {"batch norm", std::regex("batch_norm|batchnorm|bn_fw|bn_bw|bn_|welford", flags)},
      {"convolution / matmul",
       std::regex("conv|gemm|xmma|cutlass|implicit|wgrad|dgrad|fprop|cublas|sm90_|sm80_|flash|fmha|attention|nvjet|"
                  "sdpa",
                  flags)},
      {"optimizer", std::regex("adam|multi_tensor|foreach|fused_adam", flags)},
      {"cross-entropy / log-softmax", std::regex("cross_entropy|log_softmax|nll_loss", flags)},
      {"GELU", std::regex("gelu", flags)},
      {"embedding", std::regex("embedding|radix|sort|index_put|scatter", flags)},
      {"Triton (Inductor-fused)", std::regex("^triton_", flags)},
      {"copy / memset", std::regex("memcpy|memset|copy", flags)},
  };
}

/// The index of `name`'s category in `list`; list.size() for "other".
std::size_t category_of(const std::vector<Category>& list, const std::string& name) {
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (std::regex_search(name, list[i].pattern)) return i;
  }
  return list.size();
}

std::string table_cell(std::string text, std::size_t width) {
  if (text.size() > width) text = text.substr(0, width - 3) + "...";
  for (char& c : text) {
    if (c == '|') c = '/';  // a pipe would split the markdown cell
  }
  return text;
}

void print_report(const Settings& settings, const Record& record) {
  const double steps = static_cast<double>(settings.steps);
  const auto list = categories();
  std::vector<KernelTotal> by_category(list.size() + 1);  // the last one: "other"
  struct Row {
    std::string name;
    KernelTotal total;
    std::size_t category;
  };
  std::vector<Row> rows;
  double total_us = 0;
  std::int64_t total_calls = 0;
  for (const auto& [name, kernel] : record.kernels) {
    const std::size_t category = category_of(list, name);
    by_category[category].us += kernel.us;
    by_category[category].calls += kernel.calls;
    total_us += kernel.us;
    total_calls += kernel.calls;
    rows.push_back({name, kernel, category});
  }
  const double wall_ms = (record.marks[1] - record.marks[0]) / steps * 1e3;
  const double device_ms = total_us / steps / 1e3;

  std::printf("# Kernel time per step: %s, %s, batch %lld\n\n", settings.model.c_str(), settings.precision.c_str(),
              static_cast<long long>(settings.batch));
  std::printf("device: %s, LibTorch %s; %lld warm-up steps, %lld timed steps (profiler off), %lld profiled steps\n\n",
              volt::compat::cuda_device_info(0).value_or(volt::compat::CudaDeviceInfo{"?"}).name.c_str(),
              TORCH_VERSION, static_cast<long long>(settings.warmup), static_cast<long long>(settings.steps),
              static_cast<long long>(settings.steps));
  std::printf("## volt `Trainer<CUDA, SingleDevice, %s>`%s (C++)\n\n",
              settings.precision == "bf16" ? "BF16Autocast" : "FP32",
              settings.graphs ? " with `.cuda_graphs = true`" : "");
  std::printf("| category | device ms per step | share of device time | kernels per step |\n|---|---|---|---|\n");
  auto category_name = [&](std::size_t i) { return i < list.size() ? list[i].name : other_category; };
  for (std::size_t i = 0; i < by_category.size(); ++i) {
    const double share = total_us > 0 ? by_category[i].us / total_us * 100 : 0;
    std::printf("| %s | %.3f | %.1f%% | %.1f |\n", category_name(i), by_category[i].us / steps / 1e3, share,
                static_cast<double>(by_category[i].calls) / steps);
  }
  std::printf("| total | %.3f | 100%% | %.1f |\n\n", device_ms, static_cast<double>(total_calls) / steps);
  std::printf("Device time per step: %.3f ms; wall time per step (profiler off): %.3f ms; device busy %.0f%% of "
              "the step.\n\n",
              device_ms, wall_ms, wall_ms > 0 ? device_ms / wall_ms * 100 : 0);
  if (rows.empty()) {
    std::printf("The profiler recorded no CUDA activity: the table is empty.\n");
    return;
  }
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.total.us > b.total.us; });
  std::printf("Top %lld kernels by device time per step:\n\n| kernel | ms per step | calls per step | category |\n"
              "|---|---|---|---|\n",
              static_cast<long long>(settings.top));
  for (std::size_t i = 0; i < rows.size() && i < static_cast<std::size_t>(settings.top); ++i) {
    std::printf("| `%s` | %.3f | %.1f | %s |\n", table_cell(rows[i].name, 160).c_str(), rows[i].total.us / steps / 1e3,
                static_cast<double>(rows[i].total.calls) / steps, category_name(rows[i].category));
  }
}

Settings parse(int argc, char** argv) {
  Settings settings;
  if (argc % 2 == 0) throw std::invalid_argument(std::string("flag ") + argv[argc - 1] + " has no value");
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--model") settings.model = value;
    else if (flag == "--precision") settings.precision = value;
    else if (flag == "--batch") settings.batch = std::stoll(value);
    else if (flag == "--warmup") settings.warmup = std::stoll(value);
    else if (flag == "--steps") settings.steps = std::stoll(value);
    else if (flag == "--graphs") settings.graphs = std::stoi(value) != 0;
    else if (flag == "--top") settings.top = std::stoll(value);
    else throw std::invalid_argument("unknown flag " + flag);
  }
  if (settings.precision != "fp32" && settings.precision != "bf16" && settings.precision != "fp32-high") {
    throw std::invalid_argument("--precision is fp32, bf16 or fp32-high, got " + settings.precision);
  }
  if (settings.warmup < 1 || settings.steps < 1) throw std::invalid_argument("--warmup and --steps must be >= 1");
  if (settings.top < 1) throw std::invalid_argument("--top must be >= 1");
  if (settings.batch == 0) settings.batch = volt_bench::language_model(settings.model) ? 64 : 256;
  if (settings.batch < 1) throw std::invalid_argument("--batch must be >= 1");
  volt_bench::input_shape(settings.model, settings.batch);  // throws for an unknown model
  return settings;
}

}  // namespace

int main(int argc, char** argv) {
  Settings settings;
  try {
    settings = parse(argc, argv);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_kernel_breakdown: %s\n", error.what());
    return 2;
  }
  if (!torch::cuda::is_available()) {
    std::printf("bench_kernel_breakdown: no CUDA device; nothing measured\n");
    return 0;
  }
  volt::log::set_sink([](volt::log::Level, std::string_view message) {
    std::fprintf(stderr, "volt: %.*s\n", static_cast<int>(message.size()), message.data());
  });
  try {
    const auto batches = make_batches(settings, torch::Device(torch::kCUDA, 0));
    const Record record = settings.precision == "bf16" ? train<volt::BF16Autocast>(settings, batches)
                                                       : train<volt::FP32>(settings, batches);
    print_report(settings, record);
  } catch (const c10::Error& error) {
    std::fprintf(stderr, "bench_kernel_breakdown: %s\n", error.what_without_backtrace());
    return 1;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_kernel_breakdown: %s\n", error.what());
    return 1;
  }
  return 0;
}

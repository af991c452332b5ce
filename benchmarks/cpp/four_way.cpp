// The C++ rows of the four-way benchmark (benchmarks/four_way.sh; benchmarks/python/four_way.py drives this
// program and writes the table): volt's Trainer (eager, and on CUDA with TrainerOptions::cuda_graphs), a hand-written
// LibTorch loop and, on CUDA, the hand loop's whole
// step captured once in a CUDA graph and replayed ("graph limit"), on the seed MLP, the seeds' SimpleCNN,
// ResNet-18 with a CIFAR stem (contiguous, and as "resnet18-cl" in channels-last in every loop) and a small GPT
// (benchmarks/cpp/gpt.hpp), on synthetic batches that the Python rows generate identically.
//
//   bench_four_way --device cuda|cpu [--root DIR] [--batches 8] [--seed 1234] [--threads N]
//
// It prints "@@ hello key=value ..." and then answers one request per line on stdin:
//
//   run <loop> <model> <precision> <batch> <warmup> <steps>
//       loop volt | volt-graph | libtorch | graph, model mlp | simplecnn | resnet18 | resnet18-cl | resnet18-fused |
//       gpt | gpt-fused,
//       precision fp32 | bf16 | fp32-high (FP32 with float32 matmuls at "high", i.e. TF32 on CUDA)
//       -> "@@ ok <steps/s> <peak device bytes added by the row, -1 on CPU> <data checksum>"
//       -> "@@ error <message>" when the row throws (the program keeps serving)
//   quit
//
// Every run builds a fresh model (torch::manual_seed(0)), trains `warmup` optimizer steps, synchronises the device,
// times `steps` optimizer steps, synchronises again. The data are `--batches` distinct batches made on the CPU from
// torch::manual_seed(seed) (randn images, randint labels) and moved to the device once; each loop cycles through
// them, so no data loading is timed. resnet18-cl: volt's Trainer gets `.memory_format = channels_last`; the hand
// loop and the graph row put the model's 4-D parameters and buffers in channels-last themselves and convert each
// batch. fp32-high: volt's Trainer gets `.float32_matmul_precision = "high"`, the hand loops set
// at::globalContext().setFloat32MatmulPrecision("high"); after such a row the program sets "highest" again. The GPT's
// batches are token ids (randint over the vocabulary, inputs and targets). Anything else the program prints (volt's messages, LibTorch warnings) goes to
// stderr.
#include <volt/volt.hpp>

#include "task.hpp"

#if defined(VOLT_WITH_CUDA) && VOLT_TORCH_VERSION >= 20100
// The graph row needs LibTorch's CUDA graph API and the fused Adam kernel with device-side step counters (2.1+).
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#define FOUR_WAY_HAS_CUDA_GRAPH 1
#else
#define FOUR_WAY_HAS_CUDA_GRAPH 0
#endif

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

using Batches = std::vector<torch::data::Example<>>;
using volt_bench::channels_last_model;
using volt_bench::input_shape;
using volt_bench::language_model;
using volt_bench::Task;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void synchronize(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize();
}

// ---------------------------------------------------------------------------------------------------------------
// Data and device memory.

struct Data {
  Batches batches;
  std::string checksum;  // the Python rows print the same figures for their copy
};

Data make_data(const std::string& model, std::int64_t batch, int count, std::uint64_t seed,
               const torch::Device& device) {
  torch::manual_seed(seed);
  auto shape = input_shape(model, batch);
  shape.insert(shape.begin(), count);
  const auto longs = torch::TensorOptions().dtype(torch::kLong);
  const std::int64_t vocabulary = volt_bench::GptConfig{}.vocabulary;
  const auto images = language_model(model) ? torch::randint(0, vocabulary, shape, longs) : torch::randn(shape);
  const auto labels = language_model(model) ? torch::randint(0, vocabulary, shape, longs)
                                            : torch::randint(0, 10, {count, batch}, longs);
  char text[96];
  std::snprintf(text, sizeof text, "%.6e/%lld", images.sum(torch::kDouble).item<double>(),
                static_cast<long long>(labels.sum().item<std::int64_t>()));
  Data data{{}, text};
  for (int i = 0; i < count; ++i) data.batches.emplace_back(images[i].to(device), labels[i].to(device));
  synchronize(device);
  return data;
}

/// Bytes the row adds to the CUDA caching allocator's peak: peak during the row minus what was allocated when it
/// started (the data batches). -1 on the CPU.
class PeakMemory {
 public:
  explicit PeakMemory(const torch::Device& device) : device_(device) {
#ifdef VOLT_WITH_CUDA
    if (device_.is_cuda()) {
      synchronize(device_);
      c10::cuda::CUDACachingAllocator::resetPeakStats(device_.index());
      base_ = allocated(false);
    }
#endif
  }
  std::int64_t added() const {
#ifdef VOLT_WITH_CUDA
    if (device_.is_cuda()) return allocated(true) - base_;
#endif
    return -1;
  }

 private:
#ifdef VOLT_WITH_CUDA
  std::int64_t allocated(bool peak) const {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device_.index());
    const auto& all = stats.allocated_bytes[0];  // index 0: all pools together
    return peak ? all.peak : all.current;
  }
#endif
  torch::Device device_;
  std::int64_t base_ = 0;
};

struct Request {
  std::string loop, model, precision;
  std::int64_t batch = 0, warmup = 0, steps = 0;
  bool bf16() const { return precision == "bf16"; }
  bool tf32() const { return precision == "fp32-high"; }  // FP32, float32 matmuls at "high"
  bool channels_last() const { return channels_last_model(model); }
};

/// What a LibTorch user writes for channels-last: the model's 4-D parameters and buffers converted in place
/// (as Python's `model.to(memory_format=torch.channels_last)`), and each batch's images converted before the step.
void model_to_channels_last(torch::nn::Module& model) {
  torch::NoGradGuard no_grad;
  for (auto& tensor : model.parameters()) {
    if (tensor.dim() == 4) tensor.set_data(tensor.contiguous(torch::MemoryFormat::ChannelsLast));
  }
  for (auto& tensor : model.buffers()) {
    if (tensor.dim() == 4) tensor.set_data(tensor.contiguous(torch::MemoryFormat::ChannelsLast));
  }
}

torch::data::Example<> batch_to_channels_last(const torch::data::Example<>& batch) {
  return {batch.data.contiguous(torch::MemoryFormat::ChannelsLast), batch.target};
}

struct Result {
  double steps_per_second = 0;
  std::int64_t peak_bytes = -1;
};

// ---------------------------------------------------------------------------------------------------------------
// Row 1: volt's Trainer, as a user sets it up, minus the progress bar and checkpointing.

/// Synchronises and records the time when global_step reaches `warmup` and `warmup + steps`.
struct StepTimer {
  torch::Device device;
  std::int64_t warmup, steps;
  std::shared_ptr<std::vector<double>> marks = std::make_shared<std::vector<double>>();
  void on_train_batch_end(volt::TrainerState& state, const torch::Tensor&, std::int64_t) {
    if (state.global_step != warmup && state.global_step != warmup + steps) return;
    synchronize(device);
    marks->push_back(now_seconds());
  }
};

/// `total` batches cycling through the distinct ones (copies share their tensors): one epoch covers the run.
Batches one_epoch(const Batches& distinct, std::int64_t total) {
  Batches epoch;
  epoch.reserve(static_cast<std::size_t>(total));
  for (std::int64_t i = 0; i < total; ++i) epoch.push_back(distinct[static_cast<std::size_t>(i) % distinct.size()]);
  return epoch;
}

template <class Accelerator, class Precision>
Result volt_row(const Request& request, const Batches& distinct, const torch::Device& device, const std::string& root,
                bool graphs) {
  const PeakMemory memory(device);
  torch::manual_seed(0);
  auto model = std::make_shared<Task>(request.model);
  StepTimer timer{device, request.warmup, request.steps};
  const std::int64_t total = request.warmup + request.steps;
  volt::TrainerOptions options{.max_steps = total,
                               .default_root_dir = root,
                               .enable_progress_bar = false,
                               .enable_checkpointing = false,
                               .cuda_graphs = graphs};
  if (request.tf32()) options.float32_matmul_precision = "high";
  if (request.channels_last()) options.memory_format = volt::MemoryFormat::channels_last;
  volt::Trainer<Accelerator, volt::SingleDevice, Precision> trainer(std::move(options), timer);
  trainer.fit(model, one_epoch(distinct, total + 1));
  if (timer.marks->size() != 2) throw std::runtime_error("volt's Trainer stopped before the last timed step");
  // The graph row must have replayed every timed step (a declined or failed capture trains eagerly).
  if (graphs && trainer.cuda_graph_replays() < request.steps) {
    throw std::runtime_error("volt's Trainer replayed its CUDA graph " + std::to_string(trainer.cuda_graph_replays()) +
                             " times in " + std::to_string(total) + " steps");
  }
  return {static_cast<double>(request.steps) / ((*timer.marks)[1] - (*timer.marks)[0]), memory.added()};
}

Result volt_row(const Request& request, const Batches& distinct, const torch::Device& device, const std::string& root,
                bool graphs = false) {
  if (device.is_cuda()) {
    return request.bf16() ? volt_row<volt::CUDA, volt::BF16Autocast>(request, distinct, device, root, graphs)
                          : volt_row<volt::CUDA, volt::FP32>(request, distinct, device, root, graphs);
  }
  if (graphs) throw std::invalid_argument("the volt-graph row runs on CUDA only");
  // The CPU table has FP32 rows only (one Trainer type fewer to compile).
  if (request.bf16()) throw std::invalid_argument("the CPU rows are FP32 only");
  return volt_row<volt::CPU, volt::FP32>(request, distinct, device, root, false);
}

// ---------------------------------------------------------------------------------------------------------------
// Row 2: the loop a LibTorch user writes: zero_grad, forward under autocast, backward, LibTorch's Adam step.

/// Autocast for one forward pass as a LibTorch user switches it: on, dtype, nesting depth; then off again and, at
/// the outermost exit, the cache of cast weights cleared (PyTorch's `torch.autocast` does the same on exit).
/// volt/core/compat.hpp maps these calls onto LibTorch 1.13's and 2.4+'s autocast functions.
torch::Tensor forward_with_autocast(Task& model, const torch::data::Example<>& batch, std::int64_t step,
                                    c10::DeviceType device_type) {
  namespace compat = volt::compat;
  compat::set_autocast_enabled(device_type, true);
  compat::set_autocast_dtype(device_type, torch::kBFloat16);
  compat::autocast_increment_nesting();
  auto loss = model.training_step(batch, step);
  if (compat::autocast_decrement_nesting() == 0) compat::autocast_clear_cache();
  compat::set_autocast_enabled(device_type, false);
  return loss;
}

Result libtorch_row(const Request& request, const Batches& distinct, const torch::Device& device) {
  const PeakMemory memory(device);
  torch::manual_seed(0);
  if (request.tf32()) at::globalContext().setFloat32MatmulPrecision("high");
  auto model = std::make_shared<Task>(request.model);
  model->to(device);
  if (request.channels_last()) model_to_channels_last(*model);
  model->train();
  // torch::optim::Adam (AdamW for the GPT), stepped by its own step(): parameter by parameter.
  const auto optimizer = model->configure_optimizers();
  const std::int64_t total = request.warmup + request.steps;
  double start = 0;
  for (std::int64_t step = 0; step < total; ++step) {
    if (step == request.warmup) {
      synchronize(device);
      start = now_seconds();
    }
    const auto& stored = distinct[static_cast<std::size_t>(step) % distinct.size()];
    const auto batch = request.channels_last() ? batch_to_channels_last(stored) : stored;
    optimizer->zero_grad();
    auto loss = request.bf16() ? forward_with_autocast(*model, batch, step, device.type())
                               : model->training_step(batch, step);
    loss.backward();
    optimizer->step();
  }
  synchronize(device);
  return {static_cast<double>(request.steps) / (now_seconds() - start), memory.added()};
}

// ---------------------------------------------------------------------------------------------------------------
// Row 5 (CUDA): the hand loop's whole step (forward, backward, Adam) captured once in a CUDA graph and replayed.

#if FOUR_WAY_HAS_CUDA_GRAPH
/// Switches the autocast weight cache off for the row's lifetime: a captured graph must not use casts cached
/// outside it (PyTorch's make_graphed_callables demands the same).
class AutocastCacheOff {
 public:
  AutocastCacheOff() : previous_(volt::compat::autocast_cache_enabled()) {
    volt::compat::set_autocast_cache_enabled(false);
  }
  ~AutocastCacheOff() { volt::compat::set_autocast_cache_enabled(previous_); }
  AutocastCacheOff(const AutocastCacheOff&) = delete;
  AutocastCacheOff& operator=(const AutocastCacheOff&) = delete;

 private:
  bool previous_;
};

Result graph_row(const Request& request, const Batches& distinct, const torch::Device& device) {
  if (!device.is_cuda()) throw std::invalid_argument("the graph row runs on CUDA only");
  const PeakMemory memory(device);
  const AutocastCacheOff cache_off;
  const c10::cuda::CUDAGuard device_guard(device);
  if (request.tf32()) at::globalContext().setFloat32MatmulPrecision("high");
  torch::manual_seed(0);
  auto model = std::make_shared<Task>(request.model);
  model->to(device);
  if (request.channels_last()) model_to_channels_last(*model);
  model->train();
  // Adam's or (GPT) AdamW's update, as the Task's optimizer is configured.
  const bool adamw = language_model(request.model);
  const double weight_decay = adamw ? torch::optim::AdamWOptions(1e-3).weight_decay() : 0.0;
  std::vector<torch::Tensor> params = model->parameters();
  // Adam's state as PyTorch's fused Adam keeps it: moments like the parameters, the step count as a float32
  // tensor on the device, so that bias correction is computed on the device and replays stay correct.
  std::vector<torch::Tensor> exp_avgs, exp_avg_sqs, state_steps;
  for (const auto& param : params) {
    exp_avgs.push_back(torch::zeros_like(param));
    exp_avg_sqs.push_back(torch::zeros_like(param));
    state_steps.push_back(torch::zeros({}, param.options().dtype(torch::kFloat)));
  }
  // The graph reads its input from these buffers (channels-last ones for resnet18-cl); each replay first copies the
  // next batch into them (copy_ converts the layout).
  torch::data::Example<> input{distinct[0].data.clone(request.channels_last() ? torch::MemoryFormat::ChannelsLast
                                                                               : torch::MemoryFormat::Contiguous),
                               distinct[0].target.clone()};

  std::vector<torch::Tensor> grads(params.size());
  auto train_step = [&] {
    auto loss = request.bf16() ? forward_with_autocast(*model, input, 0, device.type()) : model->training_step(input, 0);
    loss.backward();
    for (std::size_t i = 0; i < params.size(); ++i) {
      grads[i] = params[i].grad();
      if (!grads[i].defined()) throw std::runtime_error("graph row: a parameter got no gradient");
    }
    torch::NoGradGuard no_grad;  // in-place updates of leaf tensors that require grad
    at::_foreach_add_(state_steps, 1);
    if (adamw) {
      at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, /*max_exp_avg_sqs=*/{}, state_steps, /*lr=*/1e-3,
                        /*beta1=*/0.9, /*beta2=*/0.999, weight_decay, /*eps=*/1e-8, /*amsgrad=*/false,
                        /*maximize=*/false);
    } else {
      at::_fused_adam_(params, grads, exp_avgs, exp_avg_sqs, /*max_exp_avg_sqs=*/{}, state_steps, /*lr=*/1e-3,
                       /*beta1=*/0.9, /*beta2=*/0.999, /*weight_decay=*/0.0, /*eps=*/1e-8, /*amsgrad=*/false,
                       /*maximize=*/false);
    }
  };
  // zero_grad(set_to_none): the captured backward then allocates the gradients in the graph's memory pool and
  // every replay writes them afresh.
  auto drop_grads = [&] {
    for (auto& param : params) param.mutable_grad() = torch::Tensor();
    for (auto& grad : grads) grad = torch::Tensor();
  };

  // Capture needs a stream other than the default one, and a few eager steps on it first (lazy initialisation of
  // cuBLAS/cuDNN handles and workspaces, cuDNN's algorithm choice, the autograd engine's device thread).
  auto side_stream = c10::cuda::getStreamFromPool(false, device.index());
  at::cuda::CUDAGraph graph;
  synchronize(device);
  {
    const c10::cuda::CUDAStreamGuard stream_guard(side_stream);
    for (int i = 0; i < 3; ++i) {
      drop_grads();
      train_step();
    }
    synchronize(device);
    drop_grads();
    graph.capture_begin();
    try {
      train_step();
    } catch (...) {
      try {
        graph.capture_end();
      } catch (...) {
      }
      throw;
    }
    graph.capture_end();
  }
  synchronize(device);

  const std::int64_t total = request.warmup + request.steps;
  double start = 0;
  for (std::int64_t step = 0; step < total; ++step) {
    if (step == request.warmup) {
      synchronize(device);
      start = now_seconds();
    }
    const auto& batch = distinct[static_cast<std::size_t>(step) % distinct.size()];
    input.data.copy_(batch.data);
    input.target.copy_(batch.target);
    graph.replay();
  }
  synchronize(device);
  const double seconds = now_seconds() - start;
  // Replays must have trained: a graph that captured nothing would leave the step counters at the warm-up's 3.
  const double counted = state_steps[0].item<double>();
  if (counted != static_cast<double>(3 + total)) {
    throw std::runtime_error("graph row: Adam's step counter reads " + std::to_string(counted) + " after " +
                             std::to_string(total) + " replays (expected " + std::to_string(3 + total) + ")");
  }
  return {static_cast<double>(request.steps) / seconds, memory.added()};
}
#endif

// ---------------------------------------------------------------------------------------------------------------

std::string one_line(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text.substr(0, 600);
}

struct Options {
  std::string device = "cpu", root = "four-way-logs";
  int batches = 8, threads = 0;
  std::uint64_t seed = 1234;
};

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--device") options.device = value;
    else if (flag == "--root") options.root = value;
    else if (flag == "--batches") options.batches = std::stoi(value);
    else if (flag == "--threads") options.threads = std::stoi(value);
    else if (flag == "--seed") options.seed = std::stoull(value);
    else throw std::invalid_argument("unknown flag " + flag);
  }
  if (options.device != "cpu" && options.device != "cuda") throw std::invalid_argument("--device is cpu or cuda");
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  try {
    options = parse(argc, argv);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_four_way: %s\n", error.what());
    return 2;
  }
  if (options.threads > 0) at::set_num_threads(options.threads);
  volt::log::set_sink([](volt::log::Level, std::string_view message) {
    std::fprintf(stderr, "volt: %.*s\n", static_cast<int>(message.size()), message.data());
  });
  const bool cuda = options.device == "cuda";
  if (cuda && !torch::cuda::is_available()) {
    std::printf("@@ fatal CUDA requested but torch::cuda::is_available() is false (LibTorch %s)\n", TORCH_VERSION);
    return 1;
  }
  const torch::Device device = cuda ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  if (cuda) at::globalContext().setBenchmarkCuDNN(true);  // the Python rows set torch.backends.cudnn.benchmark
  std::printf("@@ hello libtorch=%s threads=%d cuda_code=%d graph_row=%d compiler=%s\n", TORCH_VERSION,
              at::get_num_threads(), volt::compat::built_with_cuda ? 1 : 0, FOUR_WAY_HAS_CUDA_GRAPH,
#ifdef __VERSION__
              one_line(__VERSION__).c_str()
#else
              "unknown"
#endif
  );
  std::fflush(stdout);

  std::map<std::string, Data> data_cache;
  for (std::string line; std::getline(std::cin, line);) {
    std::istringstream words(line);
    std::string command;
    words >> command;
    if (command.empty()) continue;
    if (command == "quit") break;
    try {
      Request request;
      if (command != "run" || !(words >> request.loop >> request.model >> request.precision >> request.batch >>
                                request.warmup >> request.steps)) {
        throw std::invalid_argument("expected 'run <loop> <model> <precision> <batch> <warmup> <steps>', got '" +
                                    line + "'");
      }
      if (request.precision != "fp32" && request.precision != "bf16" && request.precision != "fp32-high") {
        throw std::invalid_argument("precision is fp32, bf16 or fp32-high, got " + request.precision);
      }
      if (request.steps < 1 || request.warmup < 1) throw std::invalid_argument("warmup and steps must be >= 1");
      const std::string key = request.model + "/" + std::to_string(request.batch);
      auto found = data_cache.find(key);
      if (found == data_cache.end()) {
        found = data_cache
                    .emplace(key, make_data(request.model, request.batch, options.batches, options.seed, device))
                    .first;
      }
      const Data& data = found->second;
      Result result;
      if (request.loop == "volt") {
        result = volt_row(request, data.batches, device, options.root);
      } else if (request.loop == "volt-graph") {
        result = volt_row(request, data.batches, device, options.root, /*graphs=*/true);
      } else if (request.loop == "libtorch") {
        result = libtorch_row(request, data.batches, device);
      } else if (request.loop == "graph") {
#if FOUR_WAY_HAS_CUDA_GRAPH
        result = graph_row(request, data.batches, device);
#else
        throw std::runtime_error(std::string("the graph row is compiled out: LibTorch ") + TORCH_VERSION +
                                 (volt::compat::built_with_cuda ? " is older than 2.1" : " has no CUDA"));
#endif
      } else {
        throw std::invalid_argument("unknown loop " + request.loop + " (volt, volt-graph, libtorch, graph)");
      }
      std::printf("@@ ok %.4f %lld %s\n", result.steps_per_second, static_cast<long long>(result.peak_bytes),
                  data.checksum.c_str());
    } catch (const c10::Error& error) {
      std::printf("@@ error %s\n", one_line(error.what_without_backtrace()).c_str());
    } catch (const std::exception& error) {
      std::printf("@@ error %s\n", one_line(error.what()).c_str());
    }
    // The row's model, optimizer state, graphs and activations are freed: hand the cached blocks back to the
    // driver, so that this process does not keep a high-water mark the other workers on the GPU then lack (seen on an
    // 80 GB H100: 72 GB held here, the Python FP32 rows out of memory), as the Python workers do after each row.
#ifdef VOLT_WITH_CUDA
    if (cuda) {
      volt::compat::cuda_empty_cache();
      const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
      std::fprintf(stderr, "bench_four_way: after '%s': %.0f MiB allocated, %.0f MiB reserved\n", line.c_str(),
                   static_cast<double>(stats.allocated_bytes[0].current) / 1048576.0,
                   static_cast<double>(stats.reserved_bytes[0].current) / 1048576.0);
    }
#endif
    // A row that threw half-way must not leave autocast switched on for the next one.
    for (auto type : {c10::DeviceType::CPU, c10::DeviceType::CUDA}) {
      if (volt::compat::autocast_available(type) && volt::compat::autocast_enabled(type)) {
        volt::compat::set_autocast_enabled(type, false);
      }
    }
    volt::compat::autocast_clear_cache();
    // Nor its float32 matmul precision (fp32-high rows set "high"; the others leave it at LibTorch's default).
    if (at::globalContext().float32MatmulPrecision() != at::Float32MatmulPrecision::HIGHEST) {
      at::globalContext().setFloat32MatmulPrecision("highest");
    }
    std::fflush(stdout);
  }
  return 0;
}

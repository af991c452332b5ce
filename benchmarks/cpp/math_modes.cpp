// What memory_format and float32_matmul_precision buy volt's Trainer, against its defaults in the same run:
// steps/s of ResNet-18 (CIFAR stem, batch 256, the four-way benchmark's model and task) and of a matmul-bound MLP
// (2048-8192-8192-8192-10, batch 2048), FP32 and BF16 autocast, eager and with cuda_graphs. Data already on the
// device, cudnn.benchmark on in every row (`.benchmark = true`, as the four-way rows set it).
//
//   bench_math_modes [--steps 40] [--warmup 10] [--rounds 3] [--models resnet18,wide]
//
// Prints a markdown table: each row's median steps/s over the rounds and its ratio to the row's baseline
// (contiguous, "highest", same precision and graph setting).
#include "task.hpp"

#include <volt/volt.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

using Batches = std::vector<torch::data::Example<>>;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// Two time marks (after a device sync): when `warmup` optimizer steps are done, and `steps` later.
struct Timer {
  std::int64_t warmup, steps;
  std::shared_ptr<std::vector<double>> marks = std::make_shared<std::vector<double>>();
  void on_train_batch_end(volt::TrainerState& state, const torch::Tensor&, std::int64_t) {
    if (state.global_step != warmup && state.global_step != warmup + steps) return;
    torch::cuda::synchronize();
    marks->push_back(now_seconds());
  }
};

/// The matmul-bound model: three 8192-wide layers.
torch::nn::Sequential make_wide() {
  namespace nn = torch::nn;
  return nn::Sequential(nn::Linear(2048, 8192), nn::ReLU(), nn::Linear(8192, 8192), nn::ReLU(), nn::Linear(8192, 8192),
                        nn::ReLU(), nn::Linear(8192, 10));
}

struct Model : torch::nn::Module {
  torch::nn::Sequential body;
  explicit Model(const std::string& name)
      : body(register_module("body", name == "wide" ? make_wide() : volt_bench::make_body(name))) {}
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t) {
    return torch::nn::functional::cross_entropy(body->forward(batch.data), batch.target);
  }
  std::shared_ptr<torch::optim::Adam> configure_optimizers() {
    return std::make_shared<torch::optim::Adam>(parameters(), torch::optim::AdamOptions(1e-4));
  }
};

struct Row {
  std::string model, precision;
  volt::MemoryFormat format;
  const char* matmul;
  bool graphs;
};

template <class Precision>
double rate(const Row& row, const Batches& data, std::int64_t warmup, std::int64_t steps) {
  torch::manual_seed(0);
  auto model = std::make_shared<Model>(row.model);
  Timer timer{warmup, steps};
  volt::Trainer<volt::CUDA, volt::SingleDevice, Precision> trainer(
      {.max_epochs = -1,
       .max_steps = warmup + steps,
       .num_sanity_val_steps = 0,
       .log_every_n_steps = 0,
       .benchmark = true,
       .float32_matmul_precision = volt::Float32MatmulPrecision::parse(row.matmul),
       .memory_format = row.format,
       .enable_progress_bar = false,
       .enable_checkpointing = false,
       .enable_model_summary = false,
       .logger = false,
       .cuda_graphs = row.graphs},
      timer);
  trainer.fit(model, data);
  if (row.graphs && trainer.cuda_graph_replays() < steps) {
    throw std::runtime_error("the CUDA graph replayed " + std::to_string(trainer.cuda_graph_replays()) + " of " +
                             std::to_string(steps) + " timed steps");
  }
  return static_cast<double>(steps) / ((*timer.marks)[1] - (*timer.marks)[0]);
}

/// `count` batches cycled to `total` (copies share their tensors).
Batches cycle(const Batches& distinct, std::int64_t total) {
  Batches out;
  for (std::int64_t i = 0; i < total; ++i) out.push_back(distinct[static_cast<std::size_t>(i) % distinct.size()]);
  return out;
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  for (std::string part; std::getline(stream, part, ',');) parts.push_back(part);
  return parts;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t steps = 40, warmup = 10;
  int rounds = 3;
  std::string models = "resnet18,wide";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--steps") steps = std::stoll(argv[i + 1]);
    else if (flag == "--warmup") warmup = std::stoll(argv[i + 1]);
    else if (flag == "--rounds") rounds = std::stoi(argv[i + 1]);
    else if (flag == "--models") models = argv[i + 1];
    else {
      std::fprintf(stderr, "bench_math_modes: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (!torch::cuda::is_available()) {
    std::printf("bench_math_modes: no CUDA device; nothing measured\n");
    return 0;
  }
  volt::log::set_sink([](volt::log::Level, std::string_view) {});
  const torch::Device device(torch::kCUDA, 0);
  std::vector<Row> rows;
  for (const auto& model : split(models)) {
    for (bool graphs : {false, true}) {
      for (auto format : {volt::MemoryFormat::contiguous, volt::MemoryFormat::channels_last}) {
        if (model == "wide" && format == volt::MemoryFormat::channels_last) continue;  // no 4-D tensors
        rows.push_back({model, "32-true", format, "highest", graphs});
        rows.push_back({model, "32-true", format, "high", graphs});
        rows.push_back({model, "bf16-mixed", format, "highest", graphs});
      }
    }
  }
  std::map<std::string, std::vector<double>> rates;
  auto key = [](const Row& row) {
    return row.model + "|" + row.precision + "|" + std::string(volt::to_string(row.format)) + "|" + row.matmul + "|" +
           (row.graphs ? "graphs" : "eager");
  };
  for (int round = 0; round < rounds; ++round) {
    for (const auto& row : rows) {
      const std::int64_t batch = row.model == "wide" ? 2048 : 256;
      Batches distinct;
      torch::manual_seed(1);
      for (int i = 0; i < 4; ++i) {
        auto shape = row.model == "wide" ? std::vector<std::int64_t>{batch, 2048}
                                         : volt_bench::input_shape(row.model, batch);
        distinct.push_back({torch::randn(shape, device),
                             torch::randint(10, {batch}, torch::TensorOptions(device).dtype(torch::kLong))});
      }
      const auto data = cycle(distinct, warmup + steps + 1);
      const double value = row.precision == "32-true" ? rate<volt::FP32>(row, data, warmup, steps)
                                                      : rate<volt::BF16Autocast>(row, data, warmup, steps);
      rates[key(row)].push_back(value);
    }
  }
  std::printf("device: %s, LibTorch %s; %lld timed steps after %lld warm-up steps per run, median of %d rounds\n\n",
              volt::compat::cuda_device_info(0).value_or(volt::compat::CudaDeviceInfo{"?"}).name.c_str(), TORCH_VERSION,
              static_cast<long long>(steps), static_cast<long long>(warmup), rounds);
  std::printf("| model | precision | steps | memory_format | float32_matmul_precision | steps/s | vs contiguous, highest |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (const auto& row : rows) {
    Row base = row;
    base.format = volt::MemoryFormat::contiguous;
    base.matmul = "highest";
    const double value = median(rates[key(row)]);
    const double baseline = median(rates[key(base)]);
    std::printf("| %s | %s | %s | %s | %s | %.1f | %.2fx |\n", row.model.c_str(), row.precision.c_str(),
                row.graphs ? "cuda_graphs" : "eager", std::string(volt::to_string(row.format)).c_str(), row.matmul,
                value, value / baseline);
  }
  return 0;
}

// Training throughput of volt's Trainer against a hand-written LibTorch loop, per precision, on random data
// already on the device. Prints a markdown table of steps/s (median of several timed runs after warm-up).
//
//   bench_trainer_throughput [--steps 200] [--wide-steps 40] [--repeats 5] [--models mlp,wide]
//                            [--precisions 32-true,bf16-mixed,16-mixed]
//
// Models:
//   mlp   the seeds' MLP, 784-256-256-10 with BatchNorm and Dropout 0.2, Adam 1e-3, batch 128 (launch-bound)
//   wide  2048-8192-8192-8192-10 with ReLU, Adam 1e-4, batch 2048 (compute-bound on a large GPU)
#include <volt/volt.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

using Batches = std::vector<torch::data::Example<>>;

struct ModelSpec {
  std::string name;
  std::int64_t input, hidden, layers, batch;
  bool batch_norm;
  double lr;
};

struct Net : torch::nn::Module {
  torch::nn::Sequential body;
  double lr;
  explicit Net(const ModelSpec& spec) : lr(spec.lr) {
    std::int64_t width = spec.input;
    for (std::int64_t i = 0; i < spec.layers; ++i) {
      body->push_back(torch::nn::Linear(width, spec.hidden));
      if (spec.batch_norm) body->push_back(torch::nn::BatchNorm1d(spec.hidden));
      body->push_back(torch::nn::ReLU());
      if (spec.batch_norm) body->push_back(torch::nn::Dropout(0.2));
      width = spec.hidden;
    }
    body->push_back(torch::nn::Linear(width, 10));
    register_module("body", body);
  }
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t) {
    return torch::nn::functional::cross_entropy(body->forward(batch.data), batch.target);
  }
  std::shared_ptr<torch::optim::Adam> configure_optimizers() {
    return std::make_shared<torch::optim::Adam>(parameters(), torch::optim::AdamOptions(lr));
  }
};

void synchronize(torch::Device device) {
  if (device.is_cuda()) torch::cuda::synchronize();
}

Batches make_data(const ModelSpec& spec, torch::Device device, int count) {
  Batches batches;
  for (int i = 0; i < count; ++i) {
    batches.emplace_back(torch::randn({spec.batch, spec.input}, device),
                         torch::randint(0, 10, {spec.batch}, torch::TensorOptions(device).dtype(torch::kLong)));
  }
  return batches;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

/// Steps per second between consecutive time marks `steps` optimizer steps apart (median).
double median_rate(const std::vector<double>& marks, std::int64_t steps) {
  std::vector<double> rates;
  for (std::size_t i = 1; i < marks.size(); ++i) rates.push_back(static_cast<double>(steps) / (marks[i] - marks[i - 1]));
  return median(rates);
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// Records the time (after a device sync) whenever global_step reaches the next mark: warm-up, then
/// `repeats` segments of `steps` optimizer steps, all inside one fit.
struct SegmentTimer {
  torch::Device device;
  std::int64_t warmup, steps;
  std::shared_ptr<std::vector<double>> marks = std::make_shared<std::vector<double>>();
  void on_train_batch_end(volt::TrainerState& state, const torch::Tensor&, std::int64_t) {
    if (state.global_step < warmup || (state.global_step - warmup) % steps != 0) return;
    synchronize(device);
    marks->push_back(now_seconds());
  }
};

template <class Precision>
double volt_rate(const ModelSpec& spec, const Batches& data, torch::Device device, int steps, int repeats) {
  torch::manual_seed(0);
  auto model = std::make_shared<Net>(spec);
  const std::int64_t warmup = std::max(5, steps / 10);
  SegmentTimer timer{device, warmup, steps};
  volt::log::set_sink([](volt::log::Level, std::string_view) {});
  volt::Trainer<volt::Auto, volt::SingleDevice, Precision> trainer(
      {.max_epochs = -1, .max_steps = warmup + static_cast<std::int64_t>(repeats) * steps, .num_sanity_val_steps = 0,
       .log_every_n_steps = 0, .enable_progress_bar = false, .enable_checkpointing = false,
       .enable_model_summary = false, .logger = false},
      timer);
  trainer.fit(model, data);
  volt::log::reset_sink();
  return median_rate(*timer.marks, steps);
}

/// The loop a LibTorch user writes by hand: zero_grad, forward, loss, backward, step.
template <bool Autocast>
double hand_rate(const ModelSpec& spec, const Batches& data, torch::Device device, int steps, int repeats,
                 c10::ScalarType autocast_dtype = torch::kBFloat16) {
  torch::manual_seed(0);
  auto model = std::make_shared<Net>(spec);
  model->to(device);
  model->train();
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(spec.lr));
  const std::int64_t warmup = std::max(5, steps / 10);
  const std::int64_t total = warmup + static_cast<std::int64_t>(repeats) * steps;
  std::vector<double> marks;
  for (std::int64_t step = 0; step < total;) {
    for (const auto& batch : data) {
      if (step == total) break;
      optimizer.zero_grad();
      torch::Tensor loss;
      if constexpr (Autocast) {
        volt::AutocastGuard guard(device.type(), autocast_dtype);
        loss = model->training_step(batch, step);
      } else {
        loss = model->training_step(batch, step);
      }
      loss.backward();
      optimizer.step();
      ++step;
      if (step >= warmup && (step - warmup) % steps == 0) {
        synchronize(device);
        marks.push_back(now_seconds());
      }
    }
  }
  return median_rate(marks, steps);
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  for (std::string part; std::getline(stream, part, ',');) parts.push_back(part);
  return parts;
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 200, wide_steps = 40, repeats = 5;
  std::string models = "mlp,wide", precisions = "32-true,bf16-mixed,16-mixed";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--steps") steps = std::stoi(argv[i + 1]);
    else if (flag == "--wide-steps") wide_steps = std::stoi(argv[i + 1]);
    else if (flag == "--repeats") repeats = std::stoi(argv[i + 1]);
    else if (flag == "--models") models = argv[i + 1];
    else if (flag == "--precisions") precisions = argv[i + 1];
  }
  const std::vector<ModelSpec> specs{{"mlp", 784, 256, 2, 128, true, 1e-3}, {"wide", 2048, 8192, 3, 2048, false, 1e-4}};
  const auto device = volt::visit_accelerator(volt::resolve_accelerator<volt::Auto>(), [](auto accelerator) {
    return decltype(accelerator)::get_parallel_devices({0}).front();
  });
  std::printf("device: %s, LibTorch %s, steps per run %d, median of %d runs\n\n", device.str().c_str(), TORCH_VERSION,
              steps, repeats);
  std::printf("| model | precision | hand-written loop (steps/s) | volt Trainer (steps/s) | volt / hand |\n");
  std::printf("|---|---|---|---|---|\n");
  const auto model_names = split(models);
  for (const auto& spec : specs) {
    if (std::find(model_names.begin(), model_names.end(), spec.name) == model_names.end()) continue;
    const auto data = make_data(spec, device, 8);
    const int model_steps = spec.name == "wide" ? wide_steps : steps;
    for (const auto& precision : split(precisions)) {
      double hand = 0, volt_steps = 0;
      if (precision == "32-true") {
        hand = hand_rate<false>(spec, data, device, model_steps, repeats);
        volt_steps = volt_rate<volt::FP32>(spec, data, device, model_steps, repeats);
      } else if (precision == "bf16-mixed") {
        hand = hand_rate<true>(spec, data, device, model_steps, repeats, torch::kBFloat16);
        volt_steps = volt_rate<volt::BF16Autocast>(spec, data, device, model_steps, repeats);
      } else if (precision == "16-mixed") {
        if (!device.is_cuda()) continue;  // fp16 autocast runs as bf16 off CUDA
        hand = 0;  // a hand loop with a grad scaler is what volt::GradScaler replaces; no LibTorch baseline
        volt_steps = volt_rate<volt::FP16Autocast>(spec, data, device, model_steps, repeats);
      } else {
        std::cerr << "unknown precision " << precision << '\n';
        return 2;
      }
      if (hand > 0) {
        std::printf("| %s | %s | %.1f | %.1f | %.3f |\n", spec.name.c_str(), precision.c_str(), hand, volt_steps,
                    volt_steps / hand);
      } else {
        std::printf("| %s | %s | - | %.1f | - |\n", spec.name.c_str(), precision.c_str(), volt_steps);
      }
      std::fflush(stdout);
    }
  }
  return 0;
}

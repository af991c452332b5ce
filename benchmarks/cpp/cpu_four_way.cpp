// The C++ half of the CPU four-way benchmark (benchmarks/cpu_four_way.sh runs it next to
// benchmarks/python/cpu_four_way.py): volt's Trainer and a hand-written LibTorch loop train the seed MLP
// (784-256-256-10 with BatchNorm, ReLU and Dropout 0.2; Adam 1e-3; batch 128) on the same Fashion-MNIST batches,
// held in memory, for the same number of optimizer steps. The two loops alternate (the first of each pair
// switches), `--repeats` times each; every
// run trains a fresh model for `--warmup` steps, then times `--steps` steps. One thread (at::set_num_threads(1)).
//
//   bench_cpu_four_way [--data-dir DIR] [--steps 300] [--warmup 30] [--repeats 3]
//
// Prints one line per timed run: "<loop> <steps/s>" with loop "volt" or "libtorch".
#include <volt/volt.hpp>

#include "../../examples/common/fashion_mnist_data.hpp"

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace {

using Batches = std::vector<torch::data::Example<>>;

struct SeedMLP : torch::nn::Module {
  torch::nn::Sequential net{torch::nn::Linear(784, 256), torch::nn::BatchNorm1d(256), torch::nn::ReLU(),
                            torch::nn::Dropout(0.2),     torch::nn::Linear(256, 256), torch::nn::BatchNorm1d(256),
                            torch::nn::ReLU(),           torch::nn::Dropout(0.2),     torch::nn::Linear(256, 10)};
  SeedMLP() { register_module("net", net); }
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t) {
    return torch::nn::functional::cross_entropy(net->forward(batch.data), batch.target);
  }
  std::shared_ptr<torch::optim::Adam> configure_optimizers() {
    return std::make_shared<torch::optim::Adam>(parameters(), torch::optim::AdamOptions(1e-3));
  }
};

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// The first `count` training batches of 128 images, flattened to 784 features, in file order: the batches the
/// Python side builds from the same files.
Batches load_batches(const std::string& data_dir, std::int64_t count) {
  const auto folder = examples::fashion_mnist_folder(data_dir).string();
  torch::data::datasets::MNIST train(folder, torch::data::datasets::MNIST::Mode::kTrain);
  // MNIST() scales the bytes to [0, 1]; then Fashion-MNIST's mean and standard deviation, as the examples do.
  const auto images = ((train.images() - 0.2860) / 0.3530).flatten(1).contiguous();
  const auto labels = train.targets().to(torch::kLong);
  Batches batches;
  for (std::int64_t i = 0; i < count; ++i) {
    batches.emplace_back(images.slice(0, i * 128, (i + 1) * 128).clone(),
                         labels.slice(0, i * 128, (i + 1) * 128).clone());
  }
  return batches;
}

/// Marks the time when global_step reaches `warmup` and `warmup + steps`.
struct StepTimer {
  std::int64_t warmup, steps;
  std::shared_ptr<std::vector<double>> marks = std::make_shared<std::vector<double>>();
  void on_train_batch_end(volt::TrainerState& state, const torch::Tensor&, std::int64_t) {
    if (state.global_step == warmup || state.global_step == warmup + steps) marks->push_back(now_seconds());
  }
};

double volt_rate(const Batches& data, std::int64_t warmup, std::int64_t steps) {
  torch::manual_seed(0);
  auto model = std::make_shared<SeedMLP>();
  StepTimer timer{warmup, steps};
  volt::Trainer<volt::CPU> trainer({.max_epochs = -1, .max_steps = warmup + steps, .num_sanity_val_steps = 0,
                                    .log_every_n_steps = 0, .enable_progress_bar = false,
                                    .enable_checkpointing = false, .enable_model_summary = false, .logger = false},
                                   timer);
  trainer.fit(model, data);
  return static_cast<double>(steps) / ((*timer.marks)[1] - (*timer.marks)[0]);
}

/// What a LibTorch user writes by hand: zero_grad, forward, loss, backward, step.
double libtorch_rate(const Batches& data, std::int64_t warmup, std::int64_t steps) {
  torch::manual_seed(0);
  auto model = std::make_shared<SeedMLP>();
  model->train();
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(1e-3));
  double start = 0;
  std::int64_t step = 0;
  const std::int64_t total = warmup + steps;
  while (step < total) {
    for (const auto& batch : data) {
      if (step == total) break;
      if (step == warmup) start = now_seconds();
      optimizer.zero_grad();
      auto loss = model->training_step(batch, step);
      loss.backward();
      optimizer.step();
      ++step;
    }
  }
  return static_cast<double>(steps) / (now_seconds() - start);
}

}  // namespace

int main(int argc, char** argv) {
  std::string data_dir;
  std::int64_t steps = 300, warmup = 30;
  int repeats = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--data-dir") data_dir = argv[i + 1];
    else if (flag == "--steps") steps = std::stoll(argv[i + 1]);
    else if (flag == "--warmup") warmup = std::stoll(argv[i + 1]);
    else if (flag == "--repeats") repeats = std::stoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  at::set_num_threads(1);
  volt::log::set_sink([](volt::log::Level, std::string_view) {});
  const Batches data = load_batches(data_dir, 60000 / 128);
  std::printf("# LibTorch %s, threads %d, %zu batches of 128\n", TORCH_VERSION, at::get_num_threads(), data.size());
  for (int repeat = 0; repeat < repeats; ++repeat) {
    // Alternate which loop goes first, so neither always runs on a cache warmed by the other.
    for (int turn = 0; turn < 2; ++turn) {
      if ((turn == 0) == (repeat % 2 == 0)) {
        std::printf("volt %.3f\n", volt_rate(data, warmup, steps));
      } else {
        std::printf("libtorch %.3f\n", libtorch_rate(data, warmup, steps));
      }
      std::fflush(stdout);
    }
  }
  return 0;
}

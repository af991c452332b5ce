// DDP scaling on CUDA: ResNet-18 (CIFAR stem) at BF16Autocast, 256 images per GPU, random data already on each
// GPU, trained by volt's Trainer on 1 GPU (SingleDevice) or N GPUs (DDP, volt's launcher starts the ranks).
//   bench_ddp_scaling --devices N [--steps 100] [--warmup 20] [--batch 256]
// Rank 0 prints one line: "volt devices=N images_per_s=X step_ms=Y".
#include <torch/torch.h>

#include <volt/volt.hpp>

#include "resnet.hpp"

#include <chrono>
#include <iostream>
#include <string>
#include <vector>

namespace {

struct Classifier : torch::nn::Module {
  volt_bench::ResNet18 net;
  Classifier() : net(10) { register_module("net", net); }
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t) {
    return torch::nn::functional::cross_entropy(net->forward(batch.data), batch.target);
  }
  auto configure_optimizers() {
    return std::make_shared<torch::optim::SGD>(parameters(),
                                              torch::optim::SGDOptions(0.1).momentum(0.9).weight_decay(5e-4));
  }
};

struct Timer {
  std::int64_t warmup;
  std::chrono::steady_clock::time_point* start;
  void on_train_batch_end(volt::TrainerState& state, const torch::Tensor&, std::int64_t) const {
    if (state.global_step == warmup) {
      torch::cuda::synchronize(state.root_device.index());
      *start = std::chrono::steady_clock::now();
    }
  }
};

template <class Strategy>
int run(int devices, std::int64_t steps, std::int64_t warmup, std::int64_t batch) {
  volt::TrainerOptions options;
  options.devices = devices;
  options.max_steps = warmup + steps;
  options.max_epochs = -1;
  options.enable_progress_bar = false;
  options.enable_checkpointing = false;
  options.enable_model_summary = false;
  options.logger = false;
  at::globalContext().setBenchmarkCuDNN(true);  // the Python side sets torch.backends.cudnn.benchmark too
  std::chrono::steady_clock::time_point start;
  volt::Trainer<volt::CUDA, Strategy, volt::BF16Autocast> timed(options, Timer{warmup, &start});
  const auto device = timed.root_device();
  torch::manual_seed(1 + static_cast<std::uint64_t>(timed.global_rank()));
  std::vector<torch::data::Example<>> batches;
  for (int i = 0; i < 16; ++i) {
    batches.emplace_back(torch::randn({batch, 3, 32, 32}, torch::TensorOptions().device(device)),
                         torch::randint(0, 10, {batch}, torch::TensorOptions().device(device).dtype(torch::kLong)));
  }
  torch::manual_seed(0);
  auto model = std::make_shared<Classifier>();
  timed.fit(model, volt::per_rank(batches));
  torch::cuda::synchronize(device.index());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (timed.global_rank() == 0) {
    const double images = static_cast<double>(steps * batch * timed.world_size());
    std::cout << "volt devices=" << timed.world_size() << " images_per_s=" << images / seconds
              << " step_ms=" << 1000.0 * seconds / static_cast<double>(steps) << std::endl;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int devices = 1;
  std::int64_t steps = 100, warmup = 20, batch = 256;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const long long value = std::stoll(argv[i + 1]);
    if (flag == "--devices") devices = static_cast<int>(value);
    else if (flag == "--steps") steps = value;
    else if (flag == "--warmup") warmup = value;
    else if (flag == "--batch") batch = value;
    else {
      std::cerr << "unknown flag " << flag << "; flags: --devices --steps --warmup --batch\n";
      return 2;
    }
  }
  if (!torch::cuda::is_available()) {
    std::cerr << "bench_ddp_scaling needs CUDA\n";
    return 1;
  }
  return devices == 1 ? run<volt::SingleDevice>(1, steps, warmup, batch) : run<volt::DDP>(devices, steps, warmup, batch);
}

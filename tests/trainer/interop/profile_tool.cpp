// Trains an MLP on Fashion-MNIST for a few steps with volt::PyTorchProfiler and volt::SimpleProfiler's reports
// in <workdir>, for tests/python/check_profiler_trace.py (which loads the Chrome trace with Python's json):
//
//   volt_profile_tool <workdir> [cpu|cuda]
//
// Prints "trace: <path>" for each trace written. Exits 77 when Fashion-MNIST is not installed (Debian's
// dataset-fashion-mnist, or VOLT_FASHION_MNIST_DIR), 1 with a message on another error.
#include <torch/torch.h>

#include <volt/volt.hpp>

#include "fashion_mnist_data.hpp"

#include <cstdio>
#include <exception>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

namespace {

struct Mlp : torch::nn::Module {
  torch::nn::Sequential net{torch::nn::Flatten(), torch::nn::Linear(784, 128), torch::nn::ReLU(), torch::nn::Linear(128, 10)};
  Mlp() { register_module("net", net); }
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t) {
    return torch::nn::functional::cross_entropy(net->forward(batch.data), batch.target);
  }
  std::shared_ptr<torch::optim::Adam> configure_optimizers() {
    return std::make_shared<torch::optim::Adam>(parameters(), torch::optim::AdamOptions(1e-3));
  }
};

template <class Accelerator>
int train(const std::filesystem::path& workdir) {
  examples::FashionMnistSplits splits = [] {
    try {
      return examples::load_fashion_mnist("");
    } catch (const std::exception& error) {
      std::cout << "SKIP: Fashion-MNIST is not available (" << error.what() << ")\n";
      std::exit(77);
    }
  }();
  auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      splits.train, torch::data::DataLoaderOptions(64));
  auto profiler = std::make_shared<volt::PyTorchProfiler>(volt::PyTorchProfilerOptions{
      .dirpath = workdir,
      .filename = "fmnist",
      .schedule = {.wait = 1, .warmup = 1, .active = 2, .repeat = 1},
      .record_shapes = true});
  volt::Trainer<Accelerator> trainer({.max_epochs = 1,
                                      .limit_train_batches = 6,
                                      .default_root_dir = workdir.string(),
                                      .enable_progress_bar = false,
                                      .enable_checkpointing = false,
                                      .enable_model_summary = false,
                                      .logger = false,
                                      .profiler = profiler});
  auto model = std::make_shared<Mlp>();
  trainer.fit(model, *loader);
  for (const auto& trace : profiler->traces()) std::cout << "trace: " << trace.string() << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: volt_profile_tool <workdir> [cpu|cuda]\n";
    return 2;
  }
  try {
    const std::filesystem::path workdir = argv[1];
    const std::string device = argc > 2 ? argv[2] : "cpu";
    if (device == "cuda") return train<volt::CUDA>(workdir);
    if (device != "cpu") {
      std::cerr << "volt_profile_tool: the device is cpu or cuda, got " << device << "\n";
      return 2;
    }
    return train<volt::CPU>(workdir);
  } catch (const std::exception& error) {
    std::cerr << "volt_profile_tool: " << error.what() << "\n";
    return 1;
  }
}

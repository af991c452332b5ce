// Optimizer step throughput: LibTorch's own optimizer.step() against volt::optim::step() with multi-tensor
// (foreach) ops and, where LibTorch has the kernel for the device, fused kernels. Only the step is timed,
// on fixed random gradients; every implementation steps its own copy of the parameters, and the
// implementations take turns within each timed round so that machine noise hits them alike.
//
//   bench_optimizer_step [--device cpu|cuda] [--steps 300] [--large-steps 20] [--repeats 5]
//                        [--models mlp,resnet18] [--optimizers adam,adamw,sgd] [--threads N]
//
// Models (parameter lists only):
//   mlp       the seeds' MLP, 784-256-256-10 with BatchNorm: 10 tensors, 0.27 M parameters (launch-bound)
//   resnet18  ResNet-18 with a CIFAR stem: 62 tensors, 11.2 M parameters
// Optimizers: adam = Adam(1e-3); adamw = AdamW(1e-3, weight_decay 1e-2); sgd = SGD(0.1, momentum 0.9, nesterov).
// Prints a markdown table of steps/s (median of the timed rounds after warm-up) and the ratio to LibTorch's.
#include <volt/optim.hpp>  // only the optimizer steps: keeps this benchmark quick to build

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Arguments {
  std::string device = "cpu";
  int steps = 300;
  int large_steps = 20;
  int repeats = 5;
  std::vector<std::string> models{"mlp", "resnet18"};
  std::vector<std::string> optimizers{"adam", "adamw", "sgd"};
  int threads = 0;  // 0: LibTorch's default intra-op thread count
};

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  for (std::string part; std::getline(stream, part, ',');) parts.push_back(part);
  return parts;
}

Arguments parse(int argc, char** argv) {
  Arguments arguments;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    const std::string value = argv[i + 1];
    if (key == "--device") {
      arguments.device = value;
    } else if (key == "--steps") {
      arguments.steps = std::stoi(value);
    } else if (key == "--large-steps") {
      arguments.large_steps = std::stoi(value);
    } else if (key == "--repeats") {
      arguments.repeats = std::stoi(value);
    } else if (key == "--models") {
      arguments.models = split(value);
    } else if (key == "--optimizers") {
      arguments.optimizers = split(value);
    } else if (key == "--threads") {
      arguments.threads = std::stoi(value);
    } else {
      throw std::invalid_argument("unknown option " + key);
    }
  }
  return arguments;
}

using Shapes = std::vector<std::vector<std::int64_t>>;

Shapes mlp_shapes() {
  return {{256, 784}, {256}, {256}, {256}, {256, 256}, {256}, {256}, {256}, {10, 256}, {10}};
}

Shapes resnet18_shapes() {
  Shapes shapes{{64, 3, 3, 3}, {64}, {64}};  // stem: conv (no bias), BatchNorm weight and bias
  std::int64_t in = 64;
  for (std::int64_t out : {64, 128, 256, 512}) {
    for (int block = 0; block < 2; ++block) {
      const std::int64_t block_in = block == 0 ? in : out;
      shapes.push_back({out, block_in, 3, 3});
      shapes.push_back({out}), shapes.push_back({out});
      shapes.push_back({out, out, 3, 3});
      shapes.push_back({out}), shapes.push_back({out});
      if (block == 0 && block_in != out) {
        shapes.push_back({out, block_in, 1, 1});
        shapes.push_back({out}), shapes.push_back({out});
      }
    }
    in = out;
  }
  shapes.push_back({10, 512});
  shapes.push_back({10});
  return shapes;
}

std::vector<torch::Tensor> make_parameters(const Shapes& shapes, torch::Device device) {
  torch::manual_seed(0);
  std::vector<torch::Tensor> parameters;
  for (const auto& shape : shapes) {
    auto parameter = torch::randn(shape, torch::TensorOptions().device(device)).mul_(0.05).requires_grad_();
    parameter.mutable_grad() = torch::randn(shape, torch::TensorOptions().device(device)).mul_(0.01);
    parameters.push_back(parameter);
  }
  return parameters;
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const std::string& name, std::vector<torch::Tensor> parameters) {
  if (name == "adam") return std::make_unique<torch::optim::Adam>(parameters, torch::optim::AdamOptions(1e-3));
  if (name == "adamw") {
    return std::make_unique<torch::optim::AdamW>(parameters, torch::optim::AdamWOptions(1e-3).weight_decay(1e-2));
  }
  if (name == "sgd") {
    return std::make_unique<torch::optim::SGD>(parameters, torch::optim::SGDOptions(0.1).momentum(0.9).nesterov(true));
  }
  throw std::invalid_argument("unknown optimizer " + name);
}

void synchronize(torch::Device device) {
  if (device.is_cuda()) torch::cuda::synchronize();
}

struct Contender {
  std::string label;
  volt::optim::Implementation implementation;  // per_parameter: LibTorch's own optimizer.step()
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::vector<double> rates;
};

void step(Contender& contender) {
  if (contender.implementation == volt::optim::Implementation::per_parameter) {
    contender.optimizer->step();
  } else {
    volt::optim::step(*contender.optimizer, contender.implementation);
  }
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const auto arguments = parse(argc, argv);
  const torch::Device device(arguments.device);
  if (device.is_cuda() && !torch::cuda::is_available()) {
    std::cerr << "no CUDA device\n";
    return 1;
  }
  if (arguments.threads > 0) torch::set_num_threads(arguments.threads);
  torch::NoGradGuard no_grad;
  std::printf("LibTorch %s, device %s, %d intra-op threads, %d timed rounds per row (median), %d steps per round (mlp), %d (resnet18)\n\n",
              TORCH_VERSION, arguments.device.c_str(), torch::get_num_threads(), arguments.repeats, arguments.steps, arguments.large_steps);
  std::printf("| model | tensors | parameters | optimizer | implementation | steps/s | vs LibTorch |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (const auto& model : arguments.models) {
    const auto shapes = model == "mlp" ? mlp_shapes() : resnet18_shapes();
    const int steps = model == "mlp" ? arguments.steps : arguments.large_steps;
    std::int64_t count = 0;
    for (const auto& shape : shapes) {
      std::int64_t numel = 1;
      for (auto size : shape) numel *= size;
      count += numel;
    }
    for (const auto& optimizer_name : arguments.optimizers) {
      std::vector<Contender> contenders;
      contenders.push_back({"LibTorch optimizer.step()", volt::optim::Implementation::per_parameter, nullptr, {}});
      contenders.push_back({"volt multi_tensor", volt::optim::Implementation::multi_tensor, nullptr, {}});
      if (optimizer_name != "sgd" && volt::compat::fused_adam_available(device.type(), optimizer_name == "adamw")) {
        contenders.push_back({"volt fused", volt::optim::Implementation::fused, nullptr, {}});
      }
      for (auto& contender : contenders) {
        contender.optimizer = make_optimizer(optimizer_name, make_parameters(shapes, device));
        for (int i = 0; i < 5; ++i) step(contender);  // warm-up: state creation, allocator, kernels
      }
      synchronize(device);
      for (int repeat = 0; repeat < arguments.repeats; ++repeat) {
        for (auto& contender : contenders) {
          synchronize(device);
          const auto start = std::chrono::steady_clock::now();
          for (int i = 0; i < steps; ++i) step(contender);
          synchronize(device);
          const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
          contender.rates.push_back(steps / elapsed.count());
        }
      }
      const double baseline = median(contenders.front().rates);
      for (const auto& contender : contenders) {
        const double rate = median(contender.rates);
        std::printf("| %s | %zu | %.2f M | %s | %s | %.0f | %.2fx |\n", model.c_str(), shapes.size(), count / 1e6,
                    optimizer_name.c_str(), contender.label.c_str(), rate, rate / baseline);
      }
      std::fflush(stdout);
    }
  }
  return 0;
}

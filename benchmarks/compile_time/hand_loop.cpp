// The README's Trainer program (benchmarks/compile_time/trainer_program.cpp) written as the plain LibTorch loop a
// user writes instead: the same MLP, the same synthetic batches, 3 epochs of training and validation accuracy,
// Adam + StepLR(3, 0.5), bf16 autocast, the device picked among CUDA and the CPU, a checkpoint of the best
// val_acc (torch::save), early stopping with patience 2, the final val_acc printed. LibTorch headers only
// (torch/torch.h does not include ATen's autocast functions, so a user adds <ATen/autocast_mode.h>).
// benchmarks/compile_time/measure.sh compares its compile time with trainer_program.cpp's.
#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include <cstdio>
#include <filesystem>
#include <vector>

struct MLP : torch::nn::Module {
  torch::nn::Sequential net{torch::nn::Flatten(), torch::nn::Linear(784, 256), torch::nn::ReLU(),
                            torch::nn::Linear(256, 10)};
  MLP() { register_module("net", net); }
  torch::Tensor forward(const torch::Tensor& x) { return net->forward(x); }
};

// `count` batches of 64 noise images of 28x28 pixels; in each, row number `label` (0-9) is brighter.
std::vector<torch::data::Example<>> random_batches(int count) {
  std::vector<torch::data::Example<>> batches;
  for (int i = 0; i < count; ++i) {
    auto labels = torch::randint(10, {64});
    auto rows = torch::nn::functional::one_hot(labels, 28).to(torch::kFloat).view({64, 1, 28, 1});
    batches.push_back({torch::randn({64, 1, 28, 28}) + rows, labels});
  }
  return batches;
}

// bf16 autocast on `device` for the lifetime of the object (what torch.autocast does in Python).
struct Autocast {
  c10::DeviceType type;
  explicit Autocast(c10::DeviceType device_type) : type(device_type) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
    at::autocast::set_autocast_enabled(type, true);
    at::autocast::set_autocast_dtype(type, torch::kBFloat16);
#else
    if (type == c10::DeviceType::CUDA) {
      at::autocast::set_enabled(true);
      at::autocast::set_autocast_gpu_dtype(torch::kBFloat16);
    } else {
      at::autocast::set_cpu_enabled(true);
      at::autocast::set_autocast_cpu_dtype(torch::kBFloat16);
    }
#endif
    at::autocast::increment_nesting();
  }
  ~Autocast() {
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
    at::autocast::set_autocast_enabled(type, false);
#else
    if (type == c10::DeviceType::CUDA) {
      at::autocast::set_enabled(false);
    } else {
      at::autocast::set_cpu_enabled(false);
    }
#endif
  }
};

// Mean accuracy over `batches`, in eval mode without gradients, under autocast.
double validate(MLP& model, const std::vector<torch::data::Example<>>& batches, const torch::Device& device) {
  torch::NoGradGuard no_grad;
  model.eval();
  double sum = 0;
  for (const auto& batch : batches) {
    Autocast autocast(device.type());
    auto data = batch.data.to(device), target = batch.target.to(device);
    auto logits = model.forward(data);
    sum += logits.argmax(1).eq(target).to(torch::kFloat).mean().item<double>();
  }
  model.train();
  return batches.empty() ? 0.0 : sum / static_cast<double>(batches.size());
}

int main() {
  torch::manual_seed(0);
  const torch::Device device = torch::cuda::is_available() ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
  auto model = std::make_shared<MLP>();
  model->to(device);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(1e-3));
  torch::optim::StepLR scheduler(optimizer, 3, 0.5);
  const auto train_batches = random_batches(8), val_batches = random_batches(2);
  const std::filesystem::path checkpoint = "checkpoints/best.pt";
  std::filesystem::create_directories(checkpoint.parent_path());

  const int max_epochs = 3, patience = 2;
  double best_val_acc = -1;
  int epochs_without_improvement = 0;
  for (int epoch = 0; epoch < max_epochs; ++epoch) {
    model->train();
    double loss_sum = 0;
    for (const auto& batch : train_batches) {
      auto data = batch.data.to(device), target = batch.target.to(device);
      optimizer.zero_grad();
      torch::Tensor loss;
      {
        Autocast autocast(device.type());
        loss = torch::nn::functional::cross_entropy(model->forward(data), target);
      }
      loss.backward();
      optimizer.step();
      loss_sum += loss.item<double>();
    }
    scheduler.step();
    const double val_acc = validate(*model, val_batches, device);
    std::printf("epoch %d: train_loss %.4f val_acc %.3f\n", epoch, loss_sum / static_cast<double>(train_batches.size()),
                val_acc);
    if (val_acc > best_val_acc) {
      best_val_acc = val_acc;
      epochs_without_improvement = 0;
      torch::save(model, checkpoint.string());
    } else if (++epochs_without_improvement >= patience) {
      std::printf("early stopping: val_acc did not improve for %d epochs\n", patience);
      break;
    }
  }
  std::printf("val_acc %.3f\n", validate(*model, random_batches(2), device));
}

// The benchmark models (the seed MLP, the seeds' SimpleCNN, ResNet-18 with a CIFAR stem), each one Sequential so that
// every loop of a benchmark drives the same type, and the task volt's Trainer and the hand loops train:
// cross-entropy, Adam 1e-3. Shared by four_way.cpp and step_profile.cpp.
#pragma once

#include "resnet.hpp"

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace volt_bench {


torch::nn::Sequential make_body(const std::string& model) {
  namespace nn = torch::nn;
  if (model == "mlp") {
    return nn::Sequential(nn::Linear(784, 256), nn::BatchNorm1d(256), nn::ReLU(), nn::Dropout(0.2),
                          nn::Linear(256, 256), nn::BatchNorm1d(256), nn::ReLU(), nn::Dropout(0.2),
                          nn::Linear(256, 10));
  }
  if (model == "simplecnn") {  // examples/fashion_mnist_cnn's SimpleCNN, features and classifier in one Sequential
    return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 32, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2),
                          nn::Conv2d(nn::Conv2dOptions(32, 64, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2),
                          nn::Flatten(), nn::Linear(64 * 7 * 7, 512), nn::ReLU(), nn::Dropout(0.25),
                          nn::Linear(512, 10));
  }
  if (model == "resnet18") return nn::Sequential(volt_bench::ResNet18(10));
  throw std::invalid_argument("unknown model '" + model + "' (mlp, simplecnn, resnet18)");
}

std::vector<std::int64_t> input_shape(const std::string& model, std::int64_t batch) {
  if (model == "mlp") return {batch, 784};
  if (model == "simplecnn") return {batch, 1, 28, 28};
  if (model == "resnet18") return {batch, 3, 32, 32};
  throw std::invalid_argument("unknown model '" + model + "'");
}

/// The model as volt's Trainer sees it; the hand loops call the same training_step.
struct Task : torch::nn::Module {
  torch::nn::Sequential body;
  explicit Task(const std::string& model) : body(register_module("body", make_body(model))) {}
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t) {
    return torch::nn::functional::cross_entropy(body->forward(batch.data), batch.target);
  }
  std::shared_ptr<torch::optim::Adam> configure_optimizers() {
    return std::make_shared<torch::optim::Adam>(parameters(), torch::optim::AdamOptions(1e-3));
  }
};

}  // namespace volt_bench

// The benchmark models (the seed MLP, the seeds' SimpleCNN, ResNet-18 with a CIFAR stem, and the same ResNet-18 run
// in channels-last as "resnet18-cl" and, in channels-last with volt::nn's fused batch-norm modules, as
// "resnet18-fused"; the small GPT of gpt.hpp as "gpt" and, with volt::nn::LayerNorm and volt::nn::Linear, as
// "gpt-fused", whose loss is volt::nn::functional::cross_entropy), each one Sequential so that every loop of a
// benchmark drives the same type, and the task volt's Trainer and the hand loops train: cross-entropy (over every
// position for the GPT), Adam 1e-3 (AdamW 1e-3, weight decay 0.01 for the GPT). Shared by four_way.cpp and
// step_profile.cpp.
#pragma once

#include "gpt.hpp"
#include "resnet.hpp"

#include <volt/nn/cross_entropy.hpp>

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
  if (model == "resnet18" || model == "resnet18-cl") return nn::Sequential(volt_bench::ResNet18(10));
  if (model == "resnet18-fused") return nn::Sequential(volt_bench::ResNet18(10, /*fused=*/true));
  if (model == "gpt") return nn::Sequential(volt_bench::Gpt(GptConfig{}));
  if (model == "gpt-fused") {
    GptConfig config;
    config.fused = true;
    return nn::Sequential(volt_bench::Gpt(config));
  }
  throw std::invalid_argument("unknown model '" + model +
                              "' (mlp, simplecnn, resnet18, resnet18-cl, resnet18-fused, gpt, gpt-fused)");
}

/// Whether every loop runs `model` in channels-last (model and batches).
inline bool channels_last_model(const std::string& model) {
  return model == "resnet18-cl" || model == "resnet18-fused";
}

/// Whether `model` is the GPT: token-id batches, AdamW.
inline bool language_model(const std::string& model) { return model == "gpt" || model == "gpt-fused"; }

std::vector<std::int64_t> input_shape(const std::string& model, std::int64_t batch) {
  if (model == "mlp") return {batch, 784};
  if (model == "simplecnn") return {batch, 1, 28, 28};
  if (model == "resnet18" || model == "resnet18-cl" || model == "resnet18-fused") return {batch, 3, 32, 32};
  if (language_model(model)) return {batch, GptConfig{}.context};
  throw std::invalid_argument("unknown model '" + model + "'");
}

/// The model as volt's Trainer sees it; the hand loops call the same training_step.
struct Task : torch::nn::Module {
  torch::nn::Sequential body;
  bool adamw;
  bool fused_loss;  // gpt-fused: volt::nn::functional::cross_entropy (one kernel forward, one backward on CUDA)
  explicit Task(const std::string& model)
      : body(register_module("body", make_body(model))),
        adamw(language_model(model)),
        fused_loss(model == "gpt-fused") {}
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t) {
    auto output = body->forward(batch.data);
    if (output.dim() == 3) {  // the GPT's (batch, sequence, vocabulary) logits: every position is one prediction
      if (fused_loss) return volt::nn::functional::cross_entropy(output.flatten(0, 1), batch.target.flatten());
      return torch::nn::functional::cross_entropy(output.flatten(0, 1), batch.target.flatten());
    }
    return torch::nn::functional::cross_entropy(output, batch.target);
  }
  std::shared_ptr<torch::optim::Optimizer> configure_optimizers() {
    if (adamw) return std::make_shared<torch::optim::AdamW>(parameters(), torch::optim::AdamWOptions(1e-3));
    return std::make_shared<torch::optim::Adam>(parameters(), torch::optim::AdamOptions(1e-3));
  }
};

}  // namespace volt_bench

// ResNet-18 with a CIFAR stem (3x3 convolution, no max-pool) for 32x32x3 inputs: the compute-bound model of
// volt's benchmarks. Same layout as torchvision's resnet18 with conv1 replaced, as benchmarks/python uses.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace volt_bench {

struct BasicBlockImpl : torch::nn::Module {
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  torch::nn::Sequential downsample{nullptr};

  BasicBlockImpl(std::int64_t in, std::int64_t out, std::int64_t stride) {
    conv1 = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false)));
    bn1 = register_module("bn1", torch::nn::BatchNorm2d(out));
    conv2 = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(out, out, 3).padding(1).bias(false)));
    bn2 = register_module("bn2", torch::nn::BatchNorm2d(out));
    if (stride != 1 || in != out) {
      downsample = register_module(
          "downsample", torch::nn::Sequential(torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 1).stride(stride).bias(false)),
                                              torch::nn::BatchNorm2d(out)));
    }
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto y = torch::relu(bn1->forward(conv1->forward(x)));
    y = bn2->forward(conv2->forward(y));
    return torch::relu(y + (downsample ? downsample->forward(x) : x));
  }
};
TORCH_MODULE(BasicBlock);

struct ResNet18Impl : torch::nn::Module {
  torch::nn::Conv2d conv1{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr};
  torch::nn::Sequential layers{nullptr};
  torch::nn::Linear fc{nullptr};

  explicit ResNet18Impl(std::int64_t classes = 10) {
    conv1 = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 64, 3).padding(1).bias(false)));
    bn1 = register_module("bn1", torch::nn::BatchNorm2d(64));
    torch::nn::Sequential body;
    std::int64_t in = 64;
    for (auto [out, stride] : std::vector<std::pair<std::int64_t, std::int64_t>>{{64, 1}, {128, 2}, {256, 2}, {512, 2}}) {
      body->push_back(BasicBlock(in, out, stride));
      body->push_back(BasicBlock(out, out, 1));
      in = out;
    }
    layers = register_module("layers", body);
    fc = register_module("fc", torch::nn::Linear(512, classes));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto y = torch::relu(bn1->forward(conv1->forward(x)));
    y = layers->forward(y);
    y = torch::adaptive_avg_pool2d(y, {1, 1}).flatten(1);
    return fc->forward(y);
  }
};
TORCH_MODULE(ResNet18);

}  // namespace volt_bench

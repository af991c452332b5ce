// ResNet-18 with a CIFAR stem (3x3 convolution, no max-pool) for 32x32x3 inputs: the compute-bound model of
// volt's benchmarks. Same layout as torchvision's resnet18 with conv1 replaced, as benchmarks/python uses.
// With `fused`, each batch norm that a ReLU follows is volt::nn::BatchNormReLU2d and each block's second batch norm,
// residual add and ReLU is volt::nn::BatchNormAddReLU2d: the same parameters under the same names, the same
// arithmetic (cuDNN's fused kernels on CUDA for channels-last inputs).
#pragma once

#include <volt/nn.hpp>

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace volt_bench {

struct BasicBlockImpl : torch::nn::Module {
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  volt::nn::BatchNormReLU2d fused_bn1{nullptr};
  volt::nn::BatchNormAddReLU2d fused_bn2{nullptr};
  torch::nn::Sequential downsample{nullptr};

  BasicBlockImpl(std::int64_t in, std::int64_t out, std::int64_t stride, bool fused = false) {
    conv1 = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false)));
    if (fused) {
      fused_bn1 = register_module("bn1", volt::nn::BatchNormReLU2d(out));
    } else {
      bn1 = register_module("bn1", torch::nn::BatchNorm2d(out));
    }
    conv2 = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(out, out, 3).padding(1).bias(false)));
    if (fused) {
      fused_bn2 = register_module("bn2", volt::nn::BatchNormAddReLU2d(out));
    } else {
      bn2 = register_module("bn2", torch::nn::BatchNorm2d(out));
    }
    if (stride != 1 || in != out) {
      downsample = register_module(
          "downsample", torch::nn::Sequential(torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 1).stride(stride).bias(false)),
                                              torch::nn::BatchNorm2d(out)));
    }
  }
  torch::Tensor forward(const torch::Tensor& x) {
    const auto shortcut = downsample ? downsample->forward(x) : x;
    if (fused_bn1) return fused_bn2->forward(conv2->forward(fused_bn1->forward(conv1->forward(x))), shortcut);
    auto y = torch::relu(bn1->forward(conv1->forward(x)));
    y = bn2->forward(conv2->forward(y));
    return torch::relu(y + shortcut);
  }
};
TORCH_MODULE(BasicBlock);

struct ResNet18Impl : torch::nn::Module {
  torch::nn::Conv2d conv1{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr};
  volt::nn::BatchNormReLU2d fused_bn1{nullptr};
  torch::nn::Sequential layers{nullptr};
  torch::nn::Linear fc{nullptr};

  explicit ResNet18Impl(std::int64_t classes = 10, bool fused = false) {
    conv1 = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 64, 3).padding(1).bias(false)));
    if (fused) {
      fused_bn1 = register_module("bn1", volt::nn::BatchNormReLU2d(64));
    } else {
      bn1 = register_module("bn1", torch::nn::BatchNorm2d(64));
    }
    torch::nn::Sequential body;
    std::int64_t in = 64;
    for (auto [out, stride] : std::vector<std::pair<std::int64_t, std::int64_t>>{{64, 1}, {128, 2}, {256, 2}, {512, 2}}) {
      body->push_back(BasicBlock(in, out, stride, fused));
      body->push_back(BasicBlock(out, out, 1, fused));
      in = out;
    }
    layers = register_module("layers", body);
    fc = register_module("fc", torch::nn::Linear(512, classes));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto y = fused_bn1 ? fused_bn1->forward(conv1->forward(x)) : torch::relu(bn1->forward(conv1->forward(x)));
    y = layers->forward(y);
    y = torch::adaptive_avg_pool2d(y, {1, 1}).flatten(1);
    return fc->forward(y);
  }
};
TORCH_MODULE(ResNet18);

}  // namespace volt_bench

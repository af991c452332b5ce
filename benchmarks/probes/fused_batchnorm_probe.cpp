// What cuDNN's fused batch-norm ops give over LibTorch's separate kernels, forward and backward, on the shapes of
// ResNet-18's CIFAR stages (batch 256, channels-last, BF16 activations with float32 batch-norm parameters, as
// under BF16 autocast). Four ways per shape:
//   libtorch bn+relu       torch::batch_norm then torch::relu, gradients by autograd
//   cudnn fused bn+relu    cudnnBatchNormalizationForwardTrainingEx / BackwardEx, CUDNN_BATCHNORM_OPS_BN_ACTIVATION
//   libtorch bn+add+relu   batch_norm, the residual add, relu (the end of a residual block)
//   cudnn fused bn+add+relu  the same Ex calls with CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION
// Each way's forward and backward is captured in a CUDA graph and replayed, so the figures are device time, not
// launch overhead. The fused results are checked against LibTorch's (output, input, weight, bias and residual
// gradients, running statistics). A probe for volt::nn::BatchNormReLU2d, built by hand on a CUDA machine:
//   T=$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')
//   C=$(python3 -c 'import nvidia.cudnn; print(list(nvidia.cudnn.__path__)[0])')
//   g++ -O2 -std=c++17 benchmarks/probes/fused_batchnorm_probe.cpp -o /tmp/probe -I$T/include \
//     -I$T/include/torch/csrc/api/include -I$C/include -I/usr/local/cuda/include -L$T/lib -L$C/lib \
//     -Wl,-rpath,$T/lib:$C/lib -ltorch -ltorch_cuda -ltorch_cpu -lc10_cuda -lc10 -l:libcudnn.so.9 \
//     -L/usr/local/cuda/lib64 -lcudart
//   /tmp/probe [iterations]
#include <torch/torch.h>

#include <ATen/cuda/CUDAGraph.h>
#include <ATen/cudnn/Handle.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

void check(cudnnStatus_t status, const char* what) {
  if (status != CUDNN_STATUS_SUCCESS) throw std::runtime_error(std::string(what) + ": " + cudnnGetErrorString(status));
}

constexpr double eps = 1e-5;
constexpr double momentum = 0.1;

// One batch-norm layer's tensors: input, residual, parameters, running statistics, and the output gradient.
struct Layer {
  torch::Tensor x, z, weight, bias, running_mean, running_var, grad;
  Layer(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, torch::ScalarType dtype) {
    auto activations = torch::TensorOptions().device(torch::kCUDA).dtype(dtype);
    auto params = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kFloat);
    x = torch::randn({n, c, h, w}, activations).contiguous(torch::MemoryFormat::ChannelsLast);
    z = torch::randn({n, c, h, w}, activations).contiguous(torch::MemoryFormat::ChannelsLast);
    grad = torch::randn({n, c, h, w}, activations).contiguous(torch::MemoryFormat::ChannelsLast);
    weight = torch::rand({c}, params) + 0.5;
    bias = torch::randn({c}, params) * 0.1;
    running_mean = torch::zeros({c}, params);
    running_var = torch::ones({c}, params);
  }
};

// LibTorch's way: y = relu(batch_norm(x) [+ z]); returns y and the gradients of x, weight, bias [, z].
std::vector<torch::Tensor> libtorch_step(Layer& l, torch::Tensor& running_mean, torch::Tensor& running_var, bool add) {
  auto x = l.x.detach().requires_grad_(true);
  auto z = l.z.detach().requires_grad_(add);
  auto weight = l.weight.detach().requires_grad_(true);
  auto bias = l.bias.detach().requires_grad_(true);
  auto y = torch::batch_norm(x, weight, bias, running_mean, running_var, /*training=*/true, momentum, eps,
                             /*cudnn_enabled=*/true);
  if (add) y = y + z;
  y = torch::relu(y);
  std::vector<torch::Tensor> inputs{x, weight, bias};
  if (add) inputs.push_back(z);
  auto grads = torch::autograd::grad({y}, inputs, {l.grad});
  grads.insert(grads.begin(), y.detach());
  return grads;
}

// cuDNN's fused way, with its descriptors, workspaces and saved statistics made once.
class Fused {
 public:
  Fused(const Layer& l, bool add) : add_(add) {
    handle_ = at::native::getCudnnHandle();
    check(cudnnCreateTensorDescriptor(&x_desc_), "cudnnCreateTensorDescriptor");
    check(cudnnCreateTensorDescriptor(&bn_desc_), "cudnnCreateTensorDescriptor");
    check(cudnnCreateActivationDescriptor(&activation_), "cudnnCreateActivationDescriptor");
    const auto type = l.x.scalar_type() == torch::kBFloat16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
    check(cudnnSetTensor4dDescriptor(x_desc_, CUDNN_TENSOR_NHWC, type, static_cast<int>(l.x.size(0)),
                                     static_cast<int>(l.x.size(1)), static_cast<int>(l.x.size(2)),
                                     static_cast<int>(l.x.size(3))),
          "cudnnSetTensor4dDescriptor");
    check(cudnnDeriveBNTensorDescriptor(bn_desc_, x_desc_, mode_), "cudnnDeriveBNTensorDescriptor");
    check(cudnnSetActivationDescriptor(activation_, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0),
          "cudnnSetActivationDescriptor");
    ops_ = add ? CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION : CUDNN_BATCHNORM_OPS_BN_ACTIVATION;
    std::size_t forward_bytes = 0, backward_bytes = 0, reserve_bytes = 0;
    check(cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(handle_, mode_, ops_, x_desc_,
                                                                   add ? x_desc_ : nullptr, x_desc_, bn_desc_,
                                                                   activation_, &forward_bytes),
          "cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize");
    check(cudnnGetBatchNormalizationBackwardExWorkspaceSize(handle_, mode_, ops_, x_desc_, x_desc_, x_desc_,
                                                            add ? x_desc_ : nullptr, x_desc_, bn_desc_, activation_,
                                                            &backward_bytes),
          "cudnnGetBatchNormalizationBackwardExWorkspaceSize");
    check(cudnnGetBatchNormalizationTrainingExReserveSpaceSize(handle_, mode_, ops_, activation_, x_desc_,
                                                               &reserve_bytes),
          "cudnnGetBatchNormalizationTrainingExReserveSpaceSize");
    auto bytes = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kByte);
    forward_workspace_ = torch::empty({static_cast<std::int64_t>(forward_bytes) + 1}, bytes);
    backward_workspace_ = torch::empty({static_cast<std::int64_t>(backward_bytes) + 1}, bytes);
    reserve_ = torch::empty({static_cast<std::int64_t>(reserve_bytes) + 1}, bytes);
    y_ = torch::empty_like(l.x);
    dx_ = torch::empty_like(l.x);
    dz_ = torch::empty_like(l.x);
    dweight_ = torch::empty_like(l.weight);
    dbias_ = torch::empty_like(l.bias);
    save_mean_ = torch::empty_like(l.weight);
    save_invstd_ = torch::empty_like(l.weight);
  }
  Fused(const Fused&) = delete;
  Fused& operator=(const Fused&) = delete;
  ~Fused() {
    cudnnDestroyActivationDescriptor(activation_);
    cudnnDestroyTensorDescriptor(bn_desc_);
    cudnnDestroyTensorDescriptor(x_desc_);
  }

  // y and the gradients of x, weight, bias [, z], as libtorch_step returns them (views of this object's buffers).
  std::vector<torch::Tensor> step(Layer& l, torch::Tensor& running_mean, torch::Tensor& running_var) {
    check(cudnnSetStream(handle_, c10::cuda::getCurrentCUDAStream()), "cudnnSetStream");
    const float one = 1.0f, zero = 0.0f;
    check(cudnnBatchNormalizationForwardTrainingEx(
              handle_, mode_, ops_, &one, &zero, x_desc_, l.x.data_ptr(), add_ ? x_desc_ : nullptr,
              add_ ? l.z.data_ptr() : nullptr, x_desc_, y_.data_ptr(), bn_desc_, l.weight.data_ptr(),
              l.bias.data_ptr(), momentum, running_mean.data_ptr(), running_var.data_ptr(), eps,
              save_mean_.data_ptr(), save_invstd_.data_ptr(), activation_, forward_workspace_.data_ptr(),
              static_cast<std::size_t>(forward_workspace_.numel() - 1), reserve_.data_ptr(),
              static_cast<std::size_t>(reserve_.numel() - 1)),
          "cudnnBatchNormalizationForwardTrainingEx");
    check(cudnnBatchNormalizationBackwardEx(
              handle_, mode_, ops_, &one, &zero, &one, &zero, x_desc_, l.x.data_ptr(), x_desc_, y_.data_ptr(),
              x_desc_, l.grad.data_ptr(), add_ ? x_desc_ : nullptr, add_ ? dz_.data_ptr() : nullptr, x_desc_,
              dx_.data_ptr(), bn_desc_, l.weight.data_ptr(), l.bias.data_ptr(), dweight_.data_ptr(),
              dbias_.data_ptr(), eps, save_mean_.data_ptr(), save_invstd_.data_ptr(), activation_,
              backward_workspace_.data_ptr(), static_cast<std::size_t>(backward_workspace_.numel() - 1),
              reserve_.data_ptr(), static_cast<std::size_t>(reserve_.numel() - 1)),
          "cudnnBatchNormalizationBackwardEx");
    std::vector<torch::Tensor> out{y_, dx_, dweight_, dbias_};
    if (add_) out.push_back(dz_);
    return out;
  }

 private:
  bool add_;
  cudnnHandle_t handle_{};
  cudnnTensorDescriptor_t x_desc_{}, bn_desc_{};
  cudnnActivationDescriptor_t activation_{};
  cudnnBatchNormMode_t mode_ = CUDNN_BATCHNORM_SPATIAL_PERSISTENT;
  cudnnBatchNormOps_t ops_{};
  torch::Tensor forward_workspace_, backward_workspace_, reserve_, y_, dx_, dz_, dweight_, dbias_, save_mean_,
      save_invstd_;
};

// Microseconds per replay of `step` captured in a CUDA graph (median of 5 timings of `iterations` replays).
double graph_microseconds(const std::function<void()>& step, int iterations) {
  auto side = c10::cuda::getStreamFromPool();
  {
    c10::cuda::CUDAStreamGuard guard(side);
    for (int i = 0; i < 3; ++i) step();  // warm-up: cuDNN plans, allocator
  }
  torch::cuda::synchronize();
  at::cuda::CUDAGraph graph;
  {
    c10::cuda::CUDAStreamGuard guard(side);
    graph.capture_begin();
    step();
    graph.capture_end();
  }
  std::vector<double> timings;
  for (int round = 0; round < 5; ++round) {
    torch::cuda::synchronize();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iterations; ++i) graph.replay();
    torch::cuda::synchronize();
    timings.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() /
                      iterations);
  }
  std::sort(timings.begin(), timings.end());
  return timings[timings.size() / 2];
}

// The largest difference between two results, relative to the reference's largest magnitude.
double relative_difference(const torch::Tensor& result, const torch::Tensor& reference) {
  const auto scale = reference.abs().max().item<double>();
  return (result.to(torch::kFloat) - reference.to(torch::kFloat)).abs().max().item<double>() /
         (scale > 0 ? scale : 1.0);
}

}  // namespace

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::stoi(argv[1]) : 200;
  if (!torch::cuda::is_available()) {
    std::puts("fused_batchnorm_probe: no CUDA device");
    return 1;
  }
  torch::manual_seed(0);
  std::printf("cuDNN %zu, LibTorch %s, %d graph replays per timing, median of 5\n\n", cudnnGetVersion(),
              TORCH_VERSION, iterations);
  std::printf("| shape (N, C, H, W) | dtype | op | libtorch us | cudnn fused us | fused speed-up | largest relative "
              "difference (y, dx, dweight, dbias[, dz], running mean, running var) |\n|---|---|---|---|---|---|---|\n");
  const std::vector<std::vector<std::int64_t>> shapes{{256, 64, 32, 32}, {256, 128, 16, 16}, {256, 256, 8, 8},
                                                      {256, 512, 4, 4}};
  for (const auto dtype : {torch::kBFloat16, torch::kHalf}) {
    for (const auto& s : shapes) {
      for (const bool add : {false, true}) {
        Layer layer(s[0], s[1], s[2], s[3], dtype);
        std::string row = "| " + std::to_string(s[0]) + ", " + std::to_string(s[1]) + ", " + std::to_string(s[2]) +
                          ", " + std::to_string(s[3]) + " | " + (dtype == torch::kBFloat16 ? "bf16" : "fp16") +
                          " | " + (add ? "bn+add+relu" : "bn+relu") + " | ";
        try {
          // Agreement: one step each from the same running statistics.
          auto mean_a = layer.running_mean.clone(), var_a = layer.running_var.clone();
          auto mean_b = layer.running_mean.clone(), var_b = layer.running_var.clone();
          const auto reference = libtorch_step(layer, mean_a, var_a, add);
          Fused fused(layer, add);
          const auto result = fused.step(layer, mean_b, var_b);
          std::string differences;
          for (std::size_t i = 0; i < reference.size(); ++i) {
            differences += (i ? ", " : "") + std::to_string(relative_difference(result[i], reference[i]));
          }
          differences += ", " + std::to_string(relative_difference(mean_b, mean_a)) + ", " +
                         std::to_string(relative_difference(var_b, var_a));
          if (add && std::getenv("PROBE_DIAGNOSE")) {
            // Whether the disagreement is the ReLU's mask: the elements whose sign differs between the two outputs
            // (LibTorch rounds the batch norm's output before the add), and the fused dz against dy masked by the
            // fused output's own ReLU.
            const auto fused_mask = result[0] > 0, reference_mask = reference[0] > 0;
            const auto g = layer.grad.to(torch::kFloat);
            std::printf("mask elements that differ: %lld of %lld; dz vs dy*(own mask): %f; dz vs dy: %f\n",
                        static_cast<long long>((fused_mask != reference_mask).sum().item<std::int64_t>()),
                        static_cast<long long>(fused_mask.numel()),
                        relative_difference(result[4], g * fused_mask.to(torch::kFloat)),
                        relative_difference(result[4], g));
          }
          auto mean = layer.running_mean.clone(), var = layer.running_var.clone();
          const double unfused_us = graph_microseconds([&] { libtorch_step(layer, mean, var, add); }, iterations);
          const double fused_us = graph_microseconds([&] { fused.step(layer, mean, var); }, iterations);
          std::printf("%s%.1f | %.1f | %.2fx | %s |\n", row.c_str(), unfused_us, fused_us, unfused_us / fused_us,
                      differences.c_str());
        } catch (const std::exception& error) {
          std::string what = error.what();
          std::printf("%s- | - | - | failed: %s |\n", row.c_str(), what.substr(0, what.find('\n')).c_str());
        }
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

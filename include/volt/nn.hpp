/// \file
/// volt/nn: modules that fuse what LibTorch runs as separate kernels, with LibTorch's state-dict layout.
///
/// volt::nn::BatchNormReLU2d (`relu(batch_norm(x))`) and volt::nn::BatchNormAddReLU2d
/// (`relu(batch_norm(x) + residual)`) hold BatchNorm2d's parameters and buffers under its names; on CUDA they run
/// cuDNN's fused NHWC training kernels for channels-last inputs, elsewhere exactly LibTorch's separate ops.
/// volt::nn::LayerNorm holds torch::nn::LayerNorm's parameters and runs one kernel forward and one backward on
/// CUDA, compiled at run time for the row length and types (NVRTC), elsewhere exactly LibTorch's layer norm.
/// volt::nn::Linear holds torch::nn::Linear's parameters and computes as PyTorch's nn.Linear (ATen's linear: the
/// bias in the matmul's epilogue for inputs of any rank, where LibTorch's C++ module adds it in a kernel of its own).
/// volt::nn::functional::cross_entropy and volt::nn::CrossEntropyLoss compute LibTorch's cross-entropy over class
/// indices with one kernel forward and one backward on CUDA (the logits read once each way, no log-softmax written),
/// elsewhere exactly LibTorch's. volt::nn::functional::split_qkv gives attention's q, k and v as views of a fused
/// projection, with a backward that writes each head gradient straight into the projection's gradient.
#pragma once

#include <volt/nn/attention.hpp>
#include <volt/nn/batch_norm_relu.hpp>
#include <volt/nn/cross_entropy.hpp>
#include <volt/nn/layer_norm.hpp>
#include <volt/nn/linear.hpp>

/// \namespace volt::nn
/// Fused modules for models: drop-in replacements for a LibTorch module or module sequence (BatchNorm2d then ReLU,
/// BatchNorm2d, a residual add and ReLU, LayerNorm, Linear, CrossEntropyLoss) with the same parameters, buffers and
/// results.


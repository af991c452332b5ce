/// \file
/// volt/nn: modules that fuse what LibTorch runs as separate kernels, with LibTorch's state-dict layout.
///
/// volt::nn::BatchNormReLU2d (`relu(batch_norm(x))`) and volt::nn::BatchNormAddReLU2d
/// (`relu(batch_norm(x) + residual)`) hold BatchNorm2d's parameters and buffers under its names; on CUDA they run
/// cuDNN's fused NHWC training kernels for channels-last inputs, elsewhere exactly LibTorch's separate ops.
#pragma once

#include <volt/nn/batch_norm_relu.hpp>

/// \namespace volt::nn
/// Fused modules for models: drop-in replacements for a LibTorch module sequence (BatchNorm2d then ReLU, or
/// BatchNorm2d, a residual add and ReLU) with the same parameters, buffers and results.


/// \file
/// volt::MemoryFormat: the layout of a model's 4-D tensors and of the batches it is given (contiguous NCHW or
/// channels-last NHWC), as TrainerOptions::memory_format and FabricOptions::memory_format choose it.
///
/// Channels-last is the layout cuDNN's fastest convolution, batch-norm and pooling kernels run in on tensor-core
/// GPUs (Python users get it with `model.to(memory_format=torch.channels_last)` and the same for each batch;
/// torch.compile's Inductor picks it by itself for models with convolutions). Only the layout changes: values,
/// shapes and state dict keys stay as they are.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/apply.hpp>

#include <torch/torch.h>

#include <string_view>
#include <utility>

namespace volt {

/// The memory format of a run's 4-D tensors.
enum class MemoryFormat {
  contiguous,     ///< LibTorch's default layout (NCHW); nothing is converted.
  channels_last,  ///< every 4-D floating parameter, buffer and batch tensor in channels-last (NHWC) strides.
  automatic,      ///< channels_last on CUDA for a model with a 2-D convolution, else contiguous.
};

/// The option's name ("contiguous", "channels_last", "automatic").
constexpr std::string_view to_string(MemoryFormat format) {
  switch (format) {
    case MemoryFormat::channels_last: return "channels_last";
    case MemoryFormat::automatic: return "automatic";
    case MemoryFormat::contiguous: break;
  }
  return "contiguous";
}

namespace detail {

/// Whether `tensor` is one that channels-last applies to: defined, floating point, 4-D.
VOLT_INLINE bool takes_channels_last(const torch::Tensor& tensor);

/// `tensor` in channels-last strides when takes_channels_last(), else `tensor` itself (no copy when it already is).
VOLT_INLINE torch::Tensor to_channels_last(const torch::Tensor& tensor);

/// `batch` with every 4-D floating tensor in channels-last strides (any collection apply_to_collection walks).
template <class Batch>
std::remove_cvref_t<Batch> batch_to_channels_last(Batch&& batch) {
  return apply_to_collection(std::forward<Batch>(batch),
                             [](const torch::Tensor& tensor) -> torch::Tensor { return to_channels_last(tensor); });
}

/// Whether `module` or one of its submodules is a 2-D convolution (Inductor's reason to pick channels-last).
VOLT_INLINE bool has_conv2d(torch::nn::Module& module);

/// Whether `format` means channels-last for `module` on `device` (automatic: CUDA and a 2-D convolution).
VOLT_INLINE bool uses_channels_last(MemoryFormat format, torch::Device device, torch::nn::Module& module);

/// Puts every 4-D floating parameter and buffer of `module` in channels-last strides, in place (the tensors
/// keep their identity, so optimizers and hooks holding them see the change; as Python's
/// `module.to(memory_format=torch.channels_last)`).
VOLT_INLINE void module_to_channels_last(torch::nn::Module& module);

}  // namespace detail
}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/transfer/impl/memory_format.ipp>
#endif

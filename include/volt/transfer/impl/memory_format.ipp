/// \file
/// Definitions of the functions declared in volt/transfer/memory_format.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE bool takes_channels_last(const torch::Tensor& tensor) {
  return tensor.defined() && tensor.dim() == 4 && tensor.is_floating_point();
}

VOLT_INLINE torch::Tensor to_channels_last(const torch::Tensor& tensor) {
  if (!takes_channels_last(tensor)) return tensor;
  return tensor.contiguous(torch::MemoryFormat::ChannelsLast);
}

VOLT_INLINE bool has_conv2d(torch::nn::Module& module) {
  auto is_conv2d = [](torch::nn::Module& candidate) {
    return candidate.as<torch::nn::Conv2d>() != nullptr || candidate.as<torch::nn::ConvTranspose2d>() != nullptr;
  };
  if (is_conv2d(module)) return true;
  // modules(false): the module itself need not be held by a shared_ptr.
  for (const auto& child : module.modules(/*include_self=*/false)) {
    if (is_conv2d(*child)) return true;
  }
  return false;
}

VOLT_INLINE bool uses_channels_last(MemoryFormat format, torch::Device device, torch::nn::Module& module) {
  if (format == MemoryFormat::channels_last) return true;
  return format == MemoryFormat::automatic && device.is_cuda() && has_conv2d(module);
}

VOLT_INLINE void module_to_channels_last(torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  for (auto& parameter : module.parameters()) {
    if (takes_channels_last(parameter) && !parameter.is_contiguous(torch::MemoryFormat::ChannelsLast)) {
      parameter.set_data(parameter.contiguous(torch::MemoryFormat::ChannelsLast));
    }
  }
  for (auto& buffer : module.buffers()) {
    if (takes_channels_last(buffer) && !buffer.is_contiguous(torch::MemoryFormat::ChannelsLast)) {
      buffer.set_data(buffer.contiguous(torch::MemoryFormat::ChannelsLast));
    }
  }
}

}  // namespace volt::detail

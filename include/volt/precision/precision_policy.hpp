/// \file
/// volt::PrecisionPolicy: what the Trainer and Fabric ask of a precision policy type.
#pragma once

#include <torch/torch.h>

#include <concepts>
#include <string_view>

namespace volt {

/// A precision policy (volt/precision/policies.hpp lists the members and what each does): a Lightning name
/// ("32-true", "bf16-mixed", ...), setup on the root device, the forward context, the loss to call backward()
/// on, and its state in checkpoints. Whether it runs on an accelerator is precision_supported, checked with its
/// own messages.
template <class P>
concept PrecisionPolicy = requires(P& precision, const torch::Tensor& loss, torch::Device device,
                                   torch::serialize::OutputArchive& out, torch::serialize::InputArchive& in) {
  { P::name } -> std::convertible_to<std::string_view>;
  precision.setup(device);
  precision.forward_context();
  { precision.pre_backward(loss) } -> std::convertible_to<torch::Tensor>;
  precision.save(out);
  precision.load(in);
};

}  // namespace volt

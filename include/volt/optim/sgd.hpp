/// \file
/// volt::optim::try_sgd_step: the multi-tensor step of LibTorch's torch::optim::SGD.
///
/// It computes LibTorch's own update (1.13 through 2.11), per param group:
///
/// ```
/// d = grad + weight_decay * p
/// momentum != 0:  buf = d (a copy) on a parameter's first step, else buf = momentum * buf + (1 - dampening) * d
///                 d = nesterov ? d + momentum * buf : buf
/// p -= lr * d
/// ```
///
/// reading and writing LibTorch's own state (SGDParamState::momentum_buffer, created only with momentum)
/// and options, so checkpoints stay interchangeable with LibTorch's SGD.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/optim/detail/gather.hpp>
#include <volt/optim/implementation.hpp>

#include <torch/torch.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <vector>

namespace volt::optim {

/// One step of `optimizer` (a torch::optim::SGD, exactly that type) with multi-tensor ops; equal to
/// `optimizer.step()` within float rounding (on CPU the same operations as LibTorch's loop).
/// There is no fused SGD here: `requested == fused` runs the multi-tensor step.
///
/// Returns Implementation::multi_tensor, or std::nullopt, changing nothing, when volt leaves the optimizer
/// to optimizer.step() (options or state of another type, a parameter listed twice, sparse or mismatched
/// gradients, tensors on several devices), when `requested == per_parameter`, and when `requested ==
/// automatic` on a CPU: there the foreach ops are a loop over the same kernels LibTorch's step runs, with
/// worse cache locality (slower on large models), so automatic keeps LibTorch's loop.
/// Throws what the ATen ops throw.
VOLT_INLINE std::optional<Implementation> try_sgd_step(torch::optim::SGD& optimizer, Implementation requested);

}  // namespace volt::optim

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/optim/impl/sgd.ipp>
#endif

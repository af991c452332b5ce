/// \file
/// volt::optim::step(optimizer): the optimizer step every volt training loop takes.
///
/// It recognises LibTorch's Adam, AdamW and SGD and runs them with multi-tensor (foreach) ops or fused
/// kernels, on LibTorch's own state and options; anything else runs optimizer.step().
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/optim/adam.hpp>
#include <volt/optim/implementation.hpp>
#include <volt/optim/sgd.hpp>

#include <torch/torch.h>

#include <optional>
#include <typeinfo>

namespace volt::optim {

/// Runs one step of `optimizer` with the best implementation `requested` allows and returns the one that
/// ran (never automatic):
///
/// * exactly torch::optim::Adam or AdamW (not a subclass, whose step() may differ): fused or multi_tensor,
///   see try_adam_step(); exactly torch::optim::SGD: multi_tensor (automatic: on CUDA only), see
///   try_sgd_step();
/// * anything else, or what those decline (sparse gradients, parameters on several devices, foreign state,
///   ...), or `requested == per_parameter`: `optimizer.step()` and per_parameter.
///
/// The result equals optimizer.step()'s within float rounding and leaves LibTorch's state format, so
/// checkpoints and a later optimizer.step() continue seamlessly. Call it where optimizer.step() would be
/// called (after backward, without a closure); counts the step in step_counts(). Throws what the ATen ops
/// or optimizer.step() throw.
VOLT_INLINE Implementation step(torch::optim::Optimizer& optimizer, Implementation requested);

/// step(optimizer, default_implementation()): what the precision policies and the GradScaler call.
VOLT_INLINE Implementation step(torch::optim::Optimizer& optimizer);

}  // namespace volt::optim

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/optim/impl/step.ipp>
#endif

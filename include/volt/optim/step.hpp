/// \file
/// volt::optim::step(optimizer): the optimizer step every volt training loop takes.
///
/// It recognises LibTorch's Adam, AdamW and SGD and runs them with multi-tensor (foreach) ops or fused
/// kernels, on LibTorch's own state and options; anything else runs optimizer.step().
#pragma once

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
inline Implementation step(torch::optim::Optimizer& optimizer, Implementation requested) {
  std::optional<Implementation> ran;
  const auto& type = typeid(optimizer);
  if (type == typeid(torch::optim::Adam)) {
    ran = try_adam_step(static_cast<torch::optim::Adam&>(optimizer), requested);
  } else if (type == typeid(torch::optim::AdamW)) {
    ran = try_adam_step(static_cast<torch::optim::AdamW&>(optimizer), requested);
  } else if (type == typeid(torch::optim::SGD)) {
    ran = try_sgd_step(static_cast<torch::optim::SGD&>(optimizer), requested);
  }
  if (!ran) {
    optimizer.step();
    ran = Implementation::per_parameter;
  }
  detail::count_step(*ran);
  return *ran;
}

/// step(optimizer, default_implementation()): what the precision policies and the GradScaler call.
inline Implementation step(torch::optim::Optimizer& optimizer) { return step(optimizer, default_implementation()); }

}  // namespace volt::optim

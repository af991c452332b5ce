/// \file
/// volt/optim: multi-tensor (foreach) and fused optimizer steps.
///
/// volt::optim::step(optimizer) runs LibTorch's Adam, AdamW and SGD with multi-tensor ops or fused kernels on
/// their own state and options (checkpoints stay LibTorch's), and any other optimizer with optimizer.step().
/// The precision policies, the GradScaler and so the Trainer and Fabric step through it; the process-wide
/// default (volt::optim::set_default_implementation) selects or opts out.
#pragma once

#include <volt/optim/adam.hpp>
#include <volt/optim/capturable.hpp>
#include <volt/optim/implementation.hpp>
#include <volt/optim/plateau.hpp>
#include <volt/optim/schedulers.hpp>
#include <volt/optim/sgd.hpp>
#include <volt/optim/step.hpp>
#include <volt/optim/swalr.hpp>

/// \namespace volt::optim
/// Multi-tensor (foreach) and fused optimizer steps for LibTorch's Adam, AdamW and SGD, and the choice of
/// implementation (volt::optim::step, set_default_implementation).

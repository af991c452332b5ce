/// \file
/// volt: PyTorch Lightning's training machinery for LibTorch, configured at compile time.
///
/// The one header users include. Each area has its own umbrella header (`volt/<area>.hpp`), and each
/// concept its own header under `include/volt/<area>/`.
#pragma once

#include <volt/version.hpp>
#include <volt/core/compat.hpp>
#include <volt/core/errors.hpp>
#include <volt/core/log.hpp>
#include <volt/core/seed.hpp>

#include <volt/accelerators.hpp>
#include <volt/transfer.hpp>
#include <volt/precision.hpp>
#include <volt/profilers.hpp>
#include <volt/strategies.hpp>
#include <volt/distributed.hpp>
#include <volt/nn.hpp>
#include <volt/optim.hpp>
#include <volt/callbacks.hpp>
#include <volt/loggers.hpp>
#include <volt/serialization.hpp>
#include <volt/trainer.hpp>
#include <volt/fabric.hpp>
#include <volt/tuner.hpp>
#include <volt/cli.hpp>
#include <volt/testing.hpp>

/// \namespace volt
/// Everything volt offers: the Trainer and Fabric, their accelerator, strategy and precision policies,
/// callbacks, loggers and the helpers they share. Implementation details live in volt::detail and are not
/// part of the API.

/// \mainpage volt API reference
///
/// volt brings PyTorch Lightning's Trainer and Fabric to LibTorch as a header-only C++20 library, with the
/// accelerator, the strategy and the precision chosen as template parameters:
///
/// ```
///   #include <volt/volt.hpp>
///   volt::Trainer<volt::CUDA, volt::DDP, volt::BF16Autocast> trainer({.devices = 2, .max_epochs = 10});
/// ```
///
/// Where to start: volt::Trainer (volt/trainer/trainer.hpp) and volt::Fabric (volt/fabric/fabric.hpp); the
/// policies volt::CPU, volt::CUDA, volt::MPS, volt::Auto, volt::SingleDevice, volt::DDP, volt::FP32,
/// volt::FP16Autocast, volt::BF16Autocast; the callbacks (volt/callbacks/callback.hpp) and loggers
/// (volt::Logger). The file list shows what each header holds. The README.md of the repository is the user
/// guide: building, examples, and how volt's behaviour compares with Lightning's.

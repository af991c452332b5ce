// volt: PyTorch Lightning's training machinery for LibTorch, configured at compile time.
//
// The one header users include. Each area has its own umbrella header (volt/<area>.hpp), and each
// concept its own header under include/volt/<area>/.
#pragma once

#include <volt/version.hpp>
#include <volt/core/compat.hpp>
#include <volt/core/errors.hpp>
#include <volt/core/log.hpp>

#include <volt/accelerators.hpp>
#include <volt/transfer.hpp>
#include <volt/precision.hpp>
#include <volt/strategies.hpp>
#include <volt/distributed.hpp>
#include <volt/optim.hpp>
#include <volt/callbacks.hpp>
#include <volt/loggers.hpp>
#include <volt/serialization.hpp>
#include <volt/trainer.hpp>
#include <volt/fabric.hpp>
#include <volt/tuner.hpp>
#include <volt/cli.hpp>
#include <volt/testing.hpp>

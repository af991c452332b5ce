// volt: PyTorch Lightning's training machinery for LibTorch, configured at compile time.
//
// The one header users include. Each area has its own umbrella header, and each concept its own
// header under include/volt/<area>/.
#pragma once

#include <volt/version.hpp>
#include <volt/core/compat.hpp>
#include <volt/core/errors.hpp>
#include <volt/core/log.hpp>

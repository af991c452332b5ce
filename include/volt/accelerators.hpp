/// \file
/// volt/accelerators: where training runs (Lightning's accelerators and device parsing).
#pragma once

#include <volt/accelerators/device_spec.hpp>
#include <volt/accelerators/device_parser.hpp>
#include <volt/accelerators/machine.hpp>
#include <volt/accelerators/accelerator.hpp>
#include <volt/accelerators/device_stats.hpp>
#include <volt/accelerators/cpu.hpp>
#include <volt/accelerators/cuda.hpp>
#include <volt/accelerators/mps.hpp>
#include <volt/accelerators/auto.hpp>
#include <volt/accelerators/connector.hpp>
#include <volt/accelerators/static_devices.hpp>
#include <volt/accelerators/fallback.hpp>

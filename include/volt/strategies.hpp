/// \file
/// volt/strategies: how training is spread over devices and processes.
#pragma once

#include <volt/strategies/strategy.hpp>
#include <volt/strategies/single_device.hpp>
#include <volt/strategies/ddp.hpp>
#include <volt/strategies/compatibility.hpp>
#include <volt/strategies/device_selection.hpp>

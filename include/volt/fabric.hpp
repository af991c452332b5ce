/// \file
/// volt/fabric: volt::Fabric, the lighter API: setup, backward, to_device, autocast, save/load, collectives.
#pragma once

#include <volt/fabric/options.hpp>
#include <volt/fabric/state.hpp>
#include <volt/fabric/data_loader.hpp>
#include <volt/fabric/fabric.hpp>

/// \file
/// volt/distributed: multi-process training: cluster environments, the launcher, c10d process groups, the
/// gradient reducer, samplers, and the strategies' run-time side.
#pragma once

#include <volt/distributed/environment.hpp>
#include <volt/distributed/launcher.hpp>
#include <volt/distributed/process_group.hpp>
#include <volt/distributed/reducer.hpp>
#include <volt/distributed/sampler.hpp>
#include <volt/distributed/ddp_runtime.hpp>

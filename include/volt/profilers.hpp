/// \file
/// volt's profilers: volt::SimpleProfiler and volt::PyTorchProfiler, given to the Trainer as
/// `TrainerOptions::profiler` ("simple", "pytorch", or a configured one). See docs/profiling.md.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/profilers/profiler.hpp>
#include <volt/profilers/pytorch_profiler.hpp>
#include <volt/profilers/simple_profiler.hpp>

#include <memory>
#include <string_view>

namespace volt::detail {

/// The profiler Lightning's `profiler=` string names: "simple" or "pytorch", in any case (made with default options),
/// null for "". Throws MisconfigurationError with Lightning's message for any other string.
VOLT_INLINE std::shared_ptr<Profiler> make_profiler(std::string_view name);

}  // namespace volt::detail

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/profilers/impl/profilers.ipp>
#endif

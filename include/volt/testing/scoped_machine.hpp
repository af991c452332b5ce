/// \file
/// volt::testing::ScopedMachine: fake the machine the accelerators see, for tests.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/accelerators/machine.hpp>

#include <mutex>
#include <utility>

/// Helpers for testing code that uses volt.
namespace volt::testing {

/// While alive, every accelerator probe (CUDA device count, LibTorch's MPS availability, the processor
/// architecture) answers from `machine` instead of the real machine, and MPS::is_available()'s cache is
/// recomputed on its next call; DISABLE_MPS is still read from the environment. The destructor restores
/// what was there before (the real machine, or an enclosing ScopedMachine), so instances nest.
/// Nothing else is faked: creating a tensor on a faked device fails as it would without the fake.
///
/// ```
///   volt::testing::ScopedMachine machine{{.cuda_device_count = 4, .torch_mps_available = true,
///                                         .processor = "arm64"}};
/// ```
class ScopedMachine {
 public:
  /// What the faked machine reports.
  using Options = machine::FakeMachine;

  /// Starts faking `options` for every thread of the process (the probes are process-wide, behind a mutex).
  explicit ScopedMachine(Options options);
  ~ScopedMachine();
  ScopedMachine(const ScopedMachine&) = delete;
  ScopedMachine& operator=(const ScopedMachine&) = delete;

  /// The machine this instance fakes.
  const Options& options() const { return options_; }

 private:
  Options options_;
  const Options* previous_ = nullptr;
};

}  // namespace volt::testing

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/testing/impl/scoped_machine.ipp>
#endif

/// \file
/// The signal connector (Lightning's trainer/connectors/signal_connector.py): while fit() runs, SIGINT and
/// SIGTERM ask it to stop after the current batch instead of ending the process.
#pragma once

#include <volt/core/linkage.hpp>
#include <csignal>
#include <stdexcept>
#include <string>

#if !defined(_WIN32)
#include <signal.h>
#endif

namespace volt {

/// What on_exception callbacks receive when SIGINT or SIGTERM stopped fit() (Lightning's KeyboardInterrupt).
/// fit() itself does not throw it: it returns, with trainer.interrupted() true.
class TrainingInterrupted : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {

/// The signal (SIGINT or SIGTERM) that asked the running fit() to stop, 0 when none did. Set by the
/// handler fit() installs while it runs (TrainerOptions::handle_signals); read between training batches.
inline volatile std::sig_atomic_t interrupt_signal = 0;

/// The name of the signal that stopped the run ("SIGINT" or "SIGTERM").
VOLT_INLINE std::string interrupt_signal_name();

/// How many ScopedInterruptHandler objects have their handler installed (0 or 1: an inner one installs
/// nothing).
inline int interrupt_handler_depth = 0;

/// While alive, SIGINT and SIGTERM set interrupt_signal instead of ending the process; the destructor
/// restores the previous handlers. The handler resets itself on delivery (SA_RESETHAND), so a second
/// signal during the graceful shutdown ends the process the default way. Handlers nest: only the outermost
/// one clears interrupt_signal and installs the handler, so a signal that arrived while an outer one was alive
/// (during a data module's prepare_data or setup) is still seen by the fit loop.
class ScopedInterruptHandler {
 public:
  explicit ScopedInterruptHandler(bool enabled);
  ScopedInterruptHandler(const ScopedInterruptHandler&) = delete;
  ScopedInterruptHandler& operator=(const ScopedInterruptHandler&) = delete;
  ~ScopedInterruptHandler();

 private:
  bool enabled_;
#if !defined(_WIN32)
  struct sigaction previous_int_ {};
  struct sigaction previous_term_ {};
#else
  void (*previous_int_)(int) = nullptr;
  void (*previous_term_)(int) = nullptr;
#endif
};

}  // namespace detail
}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/trainer/connectors/impl/signal_connector.ipp>
#endif

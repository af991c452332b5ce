/// \file
/// Definitions of the functions declared in volt/trainer/connectors/signal_connector.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE std::string interrupt_signal_name() { return interrupt_signal == SIGTERM ? "SIGTERM" : "SIGINT"; }

VOLT_INLINE ScopedInterruptHandler::ScopedInterruptHandler(bool enabled)
    : enabled_(enabled) {
  if (interrupt_handler_depth > 0) {
    enabled_ = false;  // an outer handler is installed and keeps what already arrived
    return;
  }
  interrupt_signal = 0;
  if (!enabled_) return;
  ++interrupt_handler_depth;
#if !defined(_WIN32)
  struct sigaction action {};
  action.sa_handler = [](int signal) { interrupt_signal = signal; };
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND;
  sigaction(SIGINT, &action, &previous_int_);
  sigaction(SIGTERM, &action, &previous_term_);
#else
  previous_int_ = std::signal(SIGINT, [](int signal) { interrupt_signal = signal; });
  previous_term_ = std::signal(SIGTERM, [](int signal) { interrupt_signal = signal; });
#endif
}

VOLT_INLINE ScopedInterruptHandler::~ScopedInterruptHandler() {
  if (!enabled_) return;
  --interrupt_handler_depth;
#if !defined(_WIN32)
  sigaction(SIGINT, &previous_int_, nullptr);
  sigaction(SIGTERM, &previous_term_, nullptr);
#else
  std::signal(SIGINT, previous_int_);
  std::signal(SIGTERM, previous_term_);
#endif
}

}  // namespace volt::detail

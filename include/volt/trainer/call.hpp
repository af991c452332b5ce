/// \file
/// The one place the Trainer calls hooks and handles a failed run (Lightning's trainer/call.py): a hook of the
/// table (volt/callbacks/hooks.hpp) on the model and the callbacks, the error context added to an exception,
/// and the guarded run of fit (on_exception, the loggers' "failed" status, teardown, the strategy's failure
/// note).
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/callbacks/hooks.hpp>
#include <volt/core/errors.hpp>
#include <volt/serialization/checkpoint_io.hpp>
#include <volt/trainer/connectors/callback_connector.hpp>
#include <volt/trainer/connectors/logger_connector.hpp>
#include <volt/trainer/state.hpp>
#include <volt/trainer/step_context.hpp>

#include <torch/torch.h>

#include <exception>
#include <optional>
#include <stdexcept>
#include <string>

namespace volt::detail {

/// Whether Lightning logs epoch values only in hook `H` (its _FxValidator: the start hooks of training and
/// evaluation and the epoch start and end hooks).
constexpr bool epoch_level_logging(Hook hook) {
  switch (hook) {
    case Hook::on_train_start:
    case Hook::on_validation_start:
    case Hook::on_test_start:
    case Hook::on_train_epoch_start:
    case Hook::on_train_epoch_end:
    case Hook::on_validation_epoch_start:
    case Hook::on_validation_epoch_end:
    case Hook::on_test_epoch_start:
    case Hook::on_test_epoch_end: return true;
    default: return false;
  }
}

/// Calls hook `H` in Lightning's order (trainer/call.py): every callback's, when callbacks may define it
/// (with `state` and `args`), then the model's, when the hook table lets models define it and the model does
/// (with `args` and the step context, see ModelHook). Inside an epoch-level hook, values logged default to
/// epoch values (EpochHookScope).
template <Hook H, class M, class... Arguments>
void call_hook(M& module, StepContext& context, TrainerCallbacks& callbacks, TrainerState& state, Arguments&&... args) {
  std::optional<EpochHookScope> scope;
  if constexpr (epoch_level_logging(H)) scope.emplace(state.metrics_, hook_name(H));
  if constexpr (callback_hook(H)) callbacks.template run<H>(state, args...);
  if constexpr (model_hook(H)) ModelHook<H>::call(module, context, args...);
}

/// Rethrows the exception in flight with `where` (e.g. "epoch 2, batch 17") added to its message. c10::Error
/// gets it as context and keeps its type; the standard exception types and volt's errors are rethrown as the
/// same type (std::rethrow_if_nested gives back the original object); anything else is rethrown unchanged.
[[noreturn]] VOLT_INLINE void rethrow_with_context(const std::string& where);

/// The text of `error` ("unknown exception" for a non-standard one).
VOLT_INLINE std::string exception_text(const std::exception_ptr& error);

/// How a run that did not succeed ends: on_exception with `error`, then the loggers' "failed" status and
/// teardown.
VOLT_INLINE void end_failed_run(TrainerCallbacks& callbacks, TrainerState& state, LoggerConnector& logger,
                                const std::exception_ptr& error);

/// Lightning's _call_and_handle_interrupt around fit: runs `body(finished)`, where the body sets `finished`
/// once the run has succeeded (what follows is its epilogue: the loggers' "success" and teardown). When the body
/// throws, the strategy leaves its failure note for the other ranks (`strategy.on_failure`), on_exception runs,
/// then, unless the run had finished, the loggers' "failed" status and teardown (an error there is dropped: the
/// original one is reported), and the exception propagates. The stage is none afterwards either way.
template <class Strategy, class Body>
void call_and_handle_interrupt(Strategy& strategy, TrainerCallbacks& callbacks, TrainerState& state,
                               LoggerConnector& logger, Body&& body) {
  bool finished = false;
  try {
    body(finished);
  } catch (...) {
    const auto error = std::current_exception();
    strategy.on_failure(exception_text(error));
    callbacks.run<Hook::on_exception>(state, error);
    if (!finished) {
      try {
        logger.finalize("failed");
        callbacks.run<Hook::teardown>(state);
      } catch (...) {
        // the original error is the one to report
      }
    }
    state.stage = Stage::none;
    throw;
  }
  state.stage = Stage::none;
}

}  // namespace volt::detail

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/trainer/impl/call.ipp>
#endif

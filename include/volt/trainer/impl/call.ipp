/// \file
/// Definitions of the functions declared in volt/trainer/call.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE std::string exception_text(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown exception";
  }
}

VOLT_INLINE void end_failed_run(TrainerCallbacks& callbacks, TrainerState& state, LoggerConnector& logger,
                                const std::exception_ptr& error) {
  callbacks.run<Hook::on_exception>(state, error);
  logger.finalize("failed");
  callbacks.run<Hook::teardown>(state);
}

}  // namespace volt::detail

namespace volt::detail {

[[noreturn]] VOLT_INLINE void rethrow_with_context(const std::string& where) {
  const auto message = [&](const std::exception& error) {
    return std::string(error.what()) + "\n(volt: raised during " + where + ")";
  };
  try {
    throw;
  } catch (c10::Error& error) {
    error.add_context("volt: raised during " + where);
    throw;
  } catch (const MisconfigurationError& error) {
    std::throw_with_nested(MisconfigurationError(message(error)));
  } catch (const CheckpointError& error) {
    std::throw_with_nested(CheckpointError(message(error)));
  } catch (const std::invalid_argument& error) {
    std::throw_with_nested(std::invalid_argument(message(error)));
  } catch (const std::out_of_range& error) {
    std::throw_with_nested(std::out_of_range(message(error)));
  } catch (const std::logic_error& error) {
    std::throw_with_nested(std::logic_error(message(error)));
  } catch (const std::overflow_error& error) {
    std::throw_with_nested(std::overflow_error(message(error)));
  } catch (const std::runtime_error& error) {
    std::throw_with_nested(std::runtime_error(message(error)));
  } catch (const std::exception& error) {
    std::throw_with_nested(std::runtime_error(message(error)));
  }
}

}  // namespace volt::detail

/// \file
/// volt::HistogramMonitor: histograms of the model's parameters and gradients in TensorBoard, every n steps
/// (what Lightning users write by hand with `logger.experiment.add_histogram` in a hook).
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/errors.hpp>
#include <volt/loggers/tensorboard_logger.hpp>

#include <torch/torch.h>

#include <cstdint>
#include <string>

namespace volt {

/// The options of volt::HistogramMonitor.
struct HistogramMonitorOptions {
  /// Log at optimizer steps 0, n, 2n, ... (the global step before the step is taken).
  std::int64_t every_n_steps = 100;
  /// Log each parameter's values as `parameters/<name>`.
  bool parameters = true;
  /// Log each parameter's gradient as `gradients/<name>` (parameters without a gradient are left out).
  bool gradients = true;
  /// Buckets per histogram.
  int bins = 64;
};

/// Callback: before the optimizer steps at every `every_n_steps`-th global step, writes a histogram of every
/// parameter and of its gradient (after backward, before clipping and the step) to each TensorBoardLogger of
/// the Trainer, on global rank zero. Names are the parameters' dotted names ("net.0.weight"). Several
/// optimizers: logged once per step.
class HistogramMonitor {
 public:
  /// Throws MisconfigurationError for every_n_steps < 1 or bins < 1.
  explicit HistogramMonitor(HistogramMonitorOptions options = {});

  /// Runs at fit start. Throws MisconfigurationError when the Trainer has no TensorBoardLogger.
  template <class State>
  void on_fit_start(State& state) {
    for (Logger* logger : state.loggers) {
      if (dynamic_cast<TensorBoardLogger*>(logger) != nullptr) return;
    }
    throw MisconfigurationError("Cannot use `HistogramMonitor` callback with `Trainer` that has no TensorBoardLogger.");
  }

  /// Before each optimizer step: logs the histograms when the step is due.
  template <class State>
  void on_before_optimizer_step(State& state, torch::optim::Optimizer& /*optimizer*/) {
    if (!state.is_global_zero || state.model == nullptr || state.global_step % options_.every_n_steps != 0 ||
        state.global_step == last_logged_step_) {
      return;
    }
    last_logged_step_ = state.global_step;
    for (Logger* logger : state.loggers) {
      auto* tensorboard = dynamic_cast<TensorBoardLogger*>(logger);
      if (tensorboard == nullptr) continue;
      for (const auto& item : state.model->named_parameters()) {
        const auto& parameter = item.value();
        if (options_.parameters) {
          tensorboard->log_histogram("parameters/" + item.key(), parameter, state.global_step, options_.bins);
        }
        if (options_.gradients && parameter.grad().defined()) {
          tensorboard->log_histogram("gradients/" + item.key(), parameter.grad(), state.global_step, options_.bins);
        }
      }
    }
  }

 private:
  HistogramMonitorOptions options_;
  std::int64_t last_logged_step_ = -1;
};

}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/callbacks/impl/histogram_monitor.ipp>
#endif

/// \file
/// What the Trainer's loops share (Lightning's loops reach these through `self.trainer`): the options, the
/// strategy and precision policies' run-time objects, the connectors, the state and the step context.
#pragma once

#include <volt/accelerators.hpp>
#include <volt/distributed.hpp>
#include <volt/precision.hpp>
#include <volt/profilers.hpp>
#include <volt/strategies.hpp>
#include <volt/trainer/connectors/accelerator_connector.hpp>
#include <volt/trainer/connectors/callback_connector.hpp>
#include <volt/trainer/connectors/checkpoint_connector.hpp>
#include <volt/trainer/connectors/data_connector.hpp>
#include <volt/trainer/connectors/logger_connector.hpp>
#include <volt/trainer/optimizers.hpp>
#include <volt/trainer/options.hpp>
#include <volt/trainer/state.hpp>
#include <volt/trainer/step_context.hpp>
#include <volt/transfer.hpp>

#include <torch/torch.h>

#include <concepts>
#include <cstdint>
#include <functional>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

namespace volt::detail {


/// The Trainer's parts, owned by the Trainer and passed to its loops.
template <class Strategy, class Precision>
struct TrainerParts {
  /// The Strategy policy.
  using strategy_type = Strategy;
  /// The Precision policy.
  using precision_type = Precision;

  explicit TrainerParts(TrainerOptions trainer_options);
  ~TrainerParts();
  TrainerParts(const TrainerParts&) = delete;
  TrainerParts& operator=(const TrainerParts&) = delete;

  /// The Trainer's construction (see Trainer::Trainer): validates the options, seeds, sets the math modes,
  /// selects the devices of `Accelerator`, prints the device lines on rank zero, takes the `extras`
  /// (callbacks, loggers, a configured Precision) and completes the callbacks and loggers with the defaults.
  template <class Accelerator, class... Extras>
  void set_up(Extras&&... extras) {
    begin_set_up();
    selection = select_trainer_devices<Accelerator, Strategy>(options);
    configure_devices();
    (add_extra(std::forward<Extras>(extras)), ...);
    end_set_up();
  }
  /// set_up before the device selection: the options' checks, the profiler, fast_dev_run, the math modes.
  void begin_set_up();
  /// set_up after the device selection: the strategy, the ranks, the device lines.
  void configure_devices();
  /// set_up after the extras: the timer, the callbacks' order, the precision, the defaults, the loggers.
  void end_set_up();

  /// A constructor extra: the configured precision, a logger, or a callback.
  template <class E>
  void add_extra(E&& extra) {
    using T = std::remove_cvref_t<E>;
    if constexpr (std::same_as<T, Precision>) {
      precision = std::forward<E>(extra);
    } else if constexpr (std::derived_from<T, Logger> || logger_pointer<T> ||
                         std::same_as<T, std::vector<std::shared_ptr<Logger>>>) {
      logger.add(std::forward<E>(extra));
    } else {
      callbacks.add(std::forward<E>(extra));
    }
  }

  TrainerOptions options;
  DeviceSelection selection{};
  StrategyRuntime<Strategy> strategy{};
  Precision precision{};
  CallbackConnector callbacks{};
  LoggerConnector logger;
  TrainerState state{};
  StepContext context{state};
  Optimization optimization{};
  CheckpointConnector checkpoint{};
  /// TrainerOptions::profiler, made (null: none); state.profiler_ points to it.
  std::shared_ptr<Profiler> profiler{};
  /// Whether the model and the batches are in channels-last strides (TrainerOptions::memory_format, resolved
  /// for the model and the device by prepare_module).
  bool channels_last = false;

  /// The device the model trains on.
  torch::Device root_device() const { return strategy.root_device(); }

  /// This rank's share of `data` (the strategy's rule).
  template <class Data>
  decltype(auto) distribute(Data& data) {
    return strategy.distribute_data(data);
  }

  /// The precision's conversion of `batch`, moved to the root device (in channels-last strides when the
  /// run uses them).
  template <class Batch>
  std::remove_cvref_t<Batch> prepare_batch(Batch&& batch) {
    auto moved = batch_to_device(precision.convert_input(std::forward<Batch>(batch)), root_device());
    if (channels_last) return batch_to_channels_last(std::move(moved));
    return moved;
  }

  /// Puts the model's 4-D tensors in the run's memory format (again after a checkpoint was loaded into it).
  void apply_memory_format(torch::nn::Module& module) {
    if (channels_last) module_to_channels_last(module);
  }

  /// Converts and places the model, lets the strategy wrap it, and points the state at it.
  template <class M>
  void prepare_module(M& module) {
    precision.convert_module(module);
    module.to(root_device());
    channels_last = uses_channels_last(options.memory_format, root_device(), module);
    apply_memory_format(module);
    strategy.setup_module(module);
    state.model = &module;
    state.root_device = root_device();
    state.default_root_dir = options.default_root_dir;
    state.metrics_ = &logger.metrics();
    state.loggers = logger.pointers();
  }

  /// Sends `values` to the loggers at `step`, with the current epoch.
  void log_metrics(std::map<std::string, double> values, std::int64_t step) {
    logger.log_metrics(std::move(values), step, state.current_epoch);
  }

  /// Combines epoch metrics across ranks (every rank then sees the same monitored values, so checkpointing
  /// and early stopping decide alike); nothing with one process.
  std::function<void(std::vector<double>&, Reduce)> ranks_reducer();

  /// Lightning's reduce_boolean_decision on should_stop: any rank asking to stop stops them all.
  void agree_on_stop() { state.should_stop = strategy.reduce_boolean_decision(state.should_stop, /*all=*/false); }
};

// Out of the class, so that with VOLT_SEPARATE_COMPILATION volt's policies get them from volt::compiled
// (volt/trainer/instantiations.hpp) and a program does not compile them again.
template <class Strategy, class Precision>
TrainerParts<Strategy, Precision>::TrainerParts(TrainerOptions trainer_options)
    : options(std::move(trainer_options)), logger(options.default_root_dir) {}

template <class Strategy, class Precision>
TrainerParts<Strategy, Precision>::~TrainerParts() = default;

template <class Strategy, class Precision>
void TrainerParts<Strategy, Precision>::begin_set_up() {
  validate(options);
  profiler = options.profiler.profiler ? options.profiler.profiler : make_profiler(options.profiler.name);
  state.profiler_ = profiler.get();
  apply_fast_dev_run(options);
  set_torch_flags(options);
}

template <class Strategy, class Precision>
void TrainerParts<Strategy, Precision>::configure_devices() {
  strategy.configure(selection, options.num_nodes);
  state.global_rank = strategy.global_rank();
  state.world_size = strategy.world_size();
  state.is_global_zero = strategy.is_global_zero();
  logger.set_global_zero(state.is_global_zero);
  log_device_info(selection.accelerator);
}

template <class Strategy, class Precision>
void TrainerParts<Strategy, Precision>::end_set_up() {
  callbacks.add_timer(options);
  callbacks.reorder();
  precision.setup(root_device());
  callbacks.add_defaults(options);
  logger.configure(options.logger, options.fast_dev_run > 0);
}

template <class Strategy, class Precision>
std::function<void(std::vector<double>&, Reduce)> TrainerParts<Strategy, Precision>::ranks_reducer() {
  if (strategy.world_size() == 1) return {};
  return [this](std::vector<double>& values, Reduce kind) {
    torch::Tensor tensor = torch::tensor(values, torch::kDouble).to(root_device());
    const ReduceOp op = kind == Reduce::sum ? ReduceOp::sum
                        : kind == Reduce::max ? ReduceOp::max
                        : kind == Reduce::min ? ReduceOp::min
                                              : ReduceOp::mean;
    strategy.all_reduce(tensor, op);
    tensor = tensor.cpu();
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = tensor[static_cast<std::int64_t>(i)].item<double>();
  };
}

}  // namespace volt::detail

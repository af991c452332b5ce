/// \file
/// volt::DataModule (Lightning's LightningDataModule) and how the Trainer's fit, validate, test and predict take
/// their data: a range, a loader factory, or a data module.
///
/// A data module is any class with one or more of the dataloader functions below, found at compile time (no
/// base class, as with models):
///
/// ```
/// struct FashionData {
///   void prepare_data();                         // optional: download, unpack (one process per node)
///   void setup(volt::Stage stage);               // optional: build the splits (every process); or setup()
///   auto train_dataloader();                     // what fit() trains on: a range of batches, a pointer to one
///   auto val_dataloader();                       // optional: fit()'s validation data and validate()'s
///   auto test_dataloader();                      // optional: test()'s
///   auto predict_dataloader();                   // optional: predict()'s
///   void teardown(volt::Stage stage);            // optional; or teardown()
///   void state_dict(torch::serialize::OutputArchive&) const;   // optional: state kept in checkpoints
///   void load_state_dict(torch::serialize::InputArchive&);     // optional: restored by fit(..., ckpt_path)
///   std::map<std::string, std::string> hparams();             // optional: logged with the model's
///   void on_exception(const std::exception_ptr& error);       // optional: a run failed or was interrupted
///   static constexpr bool prepare_data_per_node = false;      // optional: prepare_data on global rank 0 only
/// };
/// trainer.fit(model, data);  trainer.test(model, data);
/// ```
///
/// The Trainer calls them in Lightning's order: prepare_data (under DDP on local rank 0 only, the other ranks
/// wait), setup(stage) before the callbacks' setup, the stage's dataloader function when Lightning's loop asks
/// for it (fit: validation data in the sanity check, then the training data; again every
/// TrainerOptions::reload_dataloaders_every_n_epochs epochs), teardown(stage) before the callbacks' teardown
/// after a run that succeeded; on_exception after the callbacks' when it failed (teardown then does not run).
/// The data module must outlive the call, and, for its state to be in trainer.save_checkpoint after a fit, until
/// the next fit. See docs/data-modules.md.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/errors.hpp>
#include <volt/core/log.hpp>
#include <volt/trainer/connectors/checkpoint_connector.hpp>
#include <volt/trainer/connectors/data_connector.hpp>
#include <volt/trainer/loops/evaluation_loop.hpp>
#include <volt/trainer/loops/fit_loop.hpp>
#include <volt/trainer/loops/prediction_loop.hpp>
#include <volt/trainer/module.hpp>
#include <volt/trainer/state.hpp>

#include <torch/torch.h>

#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

namespace volt {

/// A Lightning data module: a class (not a pointer, not a range) with at least one of train_dataloader(),
/// val_dataloader(), test_dataloader(), predict_dataloader() (see the file comment for the other hooks).
template <class T>
concept DataModule = std::is_class_v<T> && !requires(T& t) { std::begin(t); } &&
                     (requires(T& t) { t.train_dataloader(); } || requires(T& t) { t.val_dataloader(); } ||
                      requires(T& t) { t.test_dataloader(); } || requires(T& t) { t.predict_dataloader(); });

namespace detail {

/// The data module's loader function for `stage` (fitting: train_dataloader; sanity_checking: val_dataloader).
template <Stage S>
struct StageLoader {
  template <class DM>
  static constexpr bool defined = S == Stage::fitting      ? requires(DM& dm) { dm.train_dataloader(); }
                                  : S == Stage::testing    ? requires(DM& dm) { dm.test_dataloader(); }
                                  : S == Stage::predicting ? requires(DM& dm) { dm.predict_dataloader(); }
                                                           : requires(DM& dm) { dm.val_dataloader(); };
  template <class DM>
  static decltype(auto) call(DM& dm) {
    if constexpr (S == Stage::fitting) {
      return dm.train_dataloader();
    } else if constexpr (S == Stage::testing) {
      return dm.test_dataloader();
    } else if constexpr (S == Stage::predicting) {
      return dm.predict_dataloader();
    } else {
      return dm.val_dataloader();
    }
  }
};

/// Whether data module `DM` has the loader function of stage `S` (`ok`); reading `ok` without it stops at the
/// static_assert, with Lightning's message (DataHooks' default *_dataloader), before anything else is compiled.
template <Stage S, class DM>
struct StageLoaderCheck {
  static constexpr bool ok = StageLoader<S>::template defined<DM>;
  static_assert(ok, "volt: the data module has no dataloader function for this call (`train_dataloader` for fit, "
                    "`val_dataloader` for validate, `test_dataloader` for test, `predict_dataloader` for predict): "
                    "`*_dataloader` must be implemented to be used with the Lightning Trainer");
};

/// A factory over the data module's loader function for stage `S`.
template <Stage S, class DM>
struct StageLoaderFactory {
  DM* dm;
  decltype(auto) operator()() const { return StageLoader<S>::call(*dm); }
};

/// The data module's class name without namespaces (Lightning keys its state with __qualname__).
template <class DM>
std::string datamodule_name() {
  std::string name = c10::demangle(typeid(DM).name());
  const auto template_start = name.find('<');
  const auto colon = name.rfind("::", template_start);
  if (colon != std::string::npos) name = name.substr(colon + 2);
  return name;
}

/// Lightning's _log_hyperparams: the data module's hyperparameters join the model's; a key both have with
/// different values is an error.
VOLT_INLINE void merge_hparams(std::map<std::string, std::string>& params, const std::map<std::string, std::string>& extra);

/// prepare_data on the process that prepares for its node (local rank 0), or for the run (global rank 0 when
/// `prepare_data_per_node` is false); every rank then waits for it and learns whether it failed.
template <class Strategy, class DM>
void prepare_datamodule(Strategy& strategy, DM& dm) {
  if constexpr (requires { dm.prepare_data(); }) {
    bool per_node = true;
    if constexpr (requires { DM::prepare_data_per_node; }) per_node = static_cast<bool>(DM::prepare_data_per_node);
    const bool here = strategy.local_rank() == 0 && (per_node || strategy.node_rank() == 0);
    strategy.run_and_agree([&] { if (here) dm.prepare_data(); }, [] {
      return std::runtime_error("volt: the data module's prepare_data failed on the rank that ran it (its error is "
                                "in that rank's output)");
    });
  }
}

template <class DM>
void datamodule_setup(DM& dm, Stage stage) {
  if constexpr (requires { dm.setup(stage); }) {
    dm.setup(stage);
  } else if constexpr (requires { dm.setup(); }) {
    dm.setup();
  }
}

template <class DM>
void datamodule_teardown(DM& dm, Stage stage) {
  if constexpr (requires { dm.teardown(stage); }) {
    dm.teardown(stage);
  } else if constexpr (requires { dm.teardown(); }) {
    dm.teardown();
  }
}

template <class DM>
void datamodule_exception(DM& dm, const std::exception_ptr& error) {
  if constexpr (requires { dm.on_exception(error); }) dm.on_exception(error);
}

/// A run of `stage` with data module `dm`: prepare_data, setup, `body()`, and teardown (by `body` itself when it
/// returns false: fit tears down before the callbacks do); on_exception when it throws.
template <class Parts, class DM, class Body>
decltype(auto) with_datamodule(Parts& parts, DM& dm, Stage stage, Body&& body) {
  // In a fit, SIGINT and SIGTERM during prepare_data and setup are kept for the loop (Lightning's
  // _call_and_handle_interrupt covers them too): the fit stops before its first batch.
  ScopedInterruptHandler interrupt_handler(parts.options.handle_signals && stage == Stage::fitting);
  try {
    parts.strategy.setup_environment();
    prepare_datamodule(parts.strategy, dm);
    datamodule_setup(dm, stage);
    if constexpr (std::is_void_v<decltype(body())>) {
      body();
    } else {
      auto result = body();
      datamodule_teardown(dm, stage);
      return result;
    }
  } catch (...) {
    datamodule_exception(dm, std::current_exception());
    throw;
  }
}

/// trainer.fit(model, dm[, ckpt_path]) for a data module with train_dataloader().
template <class Parts, class Model, class DM>
void fit_datamodule(Parts& parts, FitLoop& loop, Model& model, DM& dm, const std::filesystem::path& ckpt_path) {
  with_datamodule(parts, dm, Stage::fitting, [&] {
    auto& hooks = loop.data_hooks;
    if constexpr (requires { dm.hparams(); }) {
      hooks.hparams = [&dm](std::map<std::string, std::string>& params) { merge_hparams(params, dm.hparams()); };
    }
    if constexpr (requires(torch::serialize::OutputArchive& out, torch::serialize::InputArchive& in) {
                    std::as_const(dm).state_dict(out);
                    dm.load_state_dict(in);
                  }) {
      hooks.states.push_back({datamodule_name<DM>(),
                                   [&dm](torch::serialize::OutputArchive& archive) { std::as_const(dm).state_dict(archive); },
                                   [&dm](torch::serialize::InputArchive& archive) { dm.load_state_dict(archive); }});
    }
    hooks.teardown = [&dm] { datamodule_teardown(dm, Stage::fitting); };
    StageLoaderFactory<Stage::fitting, DM> train_factory{&dm};
    LoaderSource<decltype(train_factory)> train_source(train_factory);
    auto&& train = parts.distribute(train_source);
    using M = module_t<Model>;
    using TrainBatch = batch_t<typename LoaderSource<decltype(train_factory)>::loader_type>;
    if constexpr (StageLoader<Stage::validating>::template defined<DM>) {
      StageLoaderFactory<Stage::validating, DM> val_factory{&dm};
      using ValBatch = batch_t<typename LoaderSource<decltype(val_factory)>::loader_type>;
      if constexpr (has_validation_step<M, ValBatch>) {
        LoaderSource<decltype(val_factory)> val_source(val_factory);
        auto&& val = parts.distribute(val_source);
        loop.run(parts, model, train, val, ckpt_path);
      } else {
        log::warn_rank_zero("You passed in a `val_dataloader` but have no `validation_step`. Skipping val loop.");
        NoData none;
        loop.run(parts, model, train, none, ckpt_path);
      }
    } else {
      if constexpr (has_validation_step<M, TrainBatch>) {
        log::warn_rank_zero("You defined a `validation_step` but have no `val_dataloader`. Skipping val loop.");
      }
      NoData none;
      loop.run(parts, model, train, none, ckpt_path);
    }
    if (loop.interrupted()) {
      datamodule_exception(dm, std::make_exception_ptr(TrainingInterrupted("volt: training " + loop.stop_reason())));
    }
  });
}

/// validate(model, dm) and test(model, dm) for a data module with the stage's loader function.
template <Stage S, class Parts, class Model, class DM>
std::map<std::string, double> evaluate_datamodule(Parts& parts, EvaluationLoop& loop, Model& model, DM& dm) {
  return with_datamodule(parts, dm, S, [&] {
    decltype(auto) loader = StageLoader<S>::call(dm);
    auto&& mine = parts.distribute(loader);
    return loop.run_standalone(parts, model, mine, S);
  });
}

/// predict(model, dm) for a data module with predict_dataloader().
template <class Parts, class Model, class DM>
auto predict_datamodule(Parts& parts, Model& model, DM& dm) {
  return with_datamodule(parts, dm, Stage::predicting, [&] {
    decltype(auto) loader = StageLoader<Stage::predicting>::call(dm);
    return run_prediction(parts, model, loader);
  });
}

/// fit(): a data module, or data (a range, a pointer to one, or a loader factory) for training and validation.
template <class Parts, class Model, class TrainData, class ValData>
void run_fit(Parts& parts, FitLoop& loop, Model& model, TrainData& train_data, ValData& val_data,
             const std::filesystem::path& ckpt_path) {
  if constexpr (DataModule<TrainData> || DataModule<ValData>) {
    static_assert(std::is_same_v<ValData, NoData> && !DataModule<ValData>,
                  "volt: You cannot pass `train_dataloader` or `val_dataloaders` to `trainer.fit(datamodule=...)`: "
                  "give fit() the data module alone");
    if constexpr (DataModule<TrainData> && std::is_same_v<ValData, NoData>) {
      if constexpr (StageLoaderCheck<Stage::fitting, TrainData>::ok) {
        fit_datamodule(parts, loop, model, train_data, ckpt_path);
      }
    }
  } else {
    parts.strategy.setup_environment();
    auto&& train_source = data_source(train_data);
    auto&& val_source = data_source(val_data);
    auto&& train = parts.distribute(train_source);
    auto&& val = parts.distribute(val_source);
    loop.run(parts, model, train, val, ckpt_path);
  }
}

/// validate() and test() (`S`: validating or testing): a data module's val_dataloader or test_dataloader, a
/// loader factory's loader (asked once per call), or the data.
template <Stage S, class Parts, class Model, class Data>
std::map<std::string, double> run_evaluation(Parts& parts, EvaluationLoop& loop, Model& model, Data& data) {
  if constexpr (DataModule<Data>) {
    if constexpr (StageLoaderCheck<S, Data>::ok) {
      return evaluate_datamodule<S>(parts, loop, model, data);
    } else {
      return std::map<std::string, double>{};
    }
  } else if constexpr (loader_factory<Data>) {
    parts.strategy.setup_environment();
    decltype(auto) loader = std::invoke(data);
    auto&& mine = parts.distribute(loader);
    return loop.run_standalone(parts, model, mine, S);
  } else {
    parts.strategy.setup_environment();
    auto&& mine = parts.distribute(data);
    return loop.run_standalone(parts, model, mine, S);
  }
}

/// predict(): a data module's predict_dataloader, a loader factory's loader (asked once per call), or the data.
template <class Parts, class Model, class Data>
auto run_predict(Parts& parts, Model& model, Data& data) {
  if constexpr (DataModule<Data>) {
    if constexpr (StageLoaderCheck<Stage::predicting, Data>::ok) return predict_datamodule(parts, model, data);
  } else if constexpr (loader_factory<Data>) {
    parts.strategy.setup_environment();
    decltype(auto) loader = std::invoke(data);
    return run_prediction(parts, model, loader);
  } else {
    parts.strategy.setup_environment();
    return run_prediction(parts, model, data);
  }
}

}  // namespace detail
}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/trainer/impl/datamodule.ipp>
#endif

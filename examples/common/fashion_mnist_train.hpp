// The training program shared by the Fashion-MNIST examples: the flags they add to volt's command line,
// and fit on the data module (validation, early stopping, checkpoints, progress bar) followed by the test
// accuracy.
#pragma once

#include <volt/volt.hpp>

#include "fashion_mnist_data.hpp"

// --mlflow-uri needs the optional MLflow logger, which links libcurl: examples/CMakeLists.txt defines
// VOLT_EXAMPLES_MLFLOW=1 where CMake found libcurl.
#ifndef VOLT_EXAMPLES_MLFLOW
#define VOLT_EXAMPLES_MLFLOW 0
#endif
#if VOLT_EXAMPLES_MLFLOW
#include <volt/loggers/mlflow_logger.hpp>
#endif

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace examples {

/// Adds the Fashion-MNIST examples' own flags to `parser`.
inline void add_fashion_mnist_flags(volt::cli::Parser& parser) {
  parser.add_option("--data-dir", "DIR", "folder with the four uncompressed IDX files (default: Debian's package, "
                                         "unpacked once into ~/.cache/volt/fashion-mnist)")
      .add_option("--limit-train-batches", "N", "training batches per epoch (default: all)")
      .add_option("--limit-val-batches", "N", "validation batches per epoch (default: all)")
      .add_option("--expect-test-acc", "A", "exit with status 3 when the test accuracy is below A", "0")
      .add_option("--patience", "N", "EarlyStopping patience in validation checks", "2")
      .add_option("--checkpoint-dir", "DIR", "ModelCheckpoint's folder (default: <log dir>/checkpoints); a fixed "
                                             "folder lets a run resumed with --ckpt-path keep its checkpoints there")
      .add_option("--save-top-k", "K", "checkpoints ModelCheckpoint keeps, the best by val_acc (-1: all)", "1")
      .add_option("--every-n-train-steps", "N", "save a checkpoint every N optimizer steps instead of after each "
                                                "validation")
      .add_switch("--save-last", "also write last.ckpt at every save")
      .add_option("--save-weights", "PATH", "after fit, write the model's weights to PATH (volt::save_weights, a "
                                            "state_dict for torch.load)")
      .add_option("--lr-find", "SVG", "run the learning-rate finder first (volt::lr_find, 100 steps), print its "
                                      "suggestion, write its plot to SVG and train with the suggestion")
      .add_switch("--no-progress-bar", "print no progress bar")
      .add_switch("--tensorboard", "also log to TensorBoard: the metrics, the hparams, each validation's first "
                                   "batch as an image grid with its misclassified images, and histograms of the "
                                   "parameters and gradients every 100 steps")
      .add_option("--mlflow-uri", "URI", "also log to the MLflow tracking server at URI (e.g. http://127.0.0.1:5000): "
                                         "the metrics, the hparams, and the best checkpoint as an artifact at the "
                                         "end (needs an example built with libcurl)")
      .add_option("--mlflow-experiment", "NAME", "the MLflow experiment of --mlflow-uri", "fashion_mnist");
}

/// Whether this build of the examples can log to MLflow (--mlflow-uri).
inline constexpr bool has_mlflow = VOLT_EXAMPLES_MLFLOW != 0;

/// The examples' own flags, read and checked before anything runs: a bad value is a usage error naming the
/// flag (exit status 2), not a failure after training.
struct FashionMnistFlags {
  double expect_test_acc = 0.0;
  std::int64_t patience = 2;
  std::optional<std::int64_t> limit_train_batches;
  std::optional<std::int64_t> limit_val_batches;
  std::string lr_find_plot;
  std::string checkpoint_dir;
  int save_top_k = 1;
  std::optional<std::int64_t> every_n_train_steps;
  bool save_last = false;
  std::string save_weights;
  bool tensorboard = false;
  std::string mlflow_uri;
  std::string mlflow_experiment;
};

inline FashionMnistFlags read_fashion_mnist_flags(const volt::cli::Args& args) {
  FashionMnistFlags flags;
  flags.expect_test_acc = args.get_double("--expect-test-acc");
  if (!std::isfinite(flags.expect_test_acc) || flags.expect_test_acc < 0.0 || flags.expect_test_acc > 1.0) {
    throw volt::cli::UsageError("argument --expect-test-acc: expected an accuracy between 0 and 1, got '" +
                                args.get("--expect-test-acc") + "'");
  }
  const auto non_negative = [&](const char* flag) {
    const std::int64_t value = args.get_int(flag);
    if (value < 0) {
      throw volt::cli::UsageError("argument " + std::string(flag) + ": expected a non-negative integer, got " +
                                  std::to_string(value));
    }
    return value;
  };
  flags.patience = non_negative("--patience");
  if (args.is_set("--limit-train-batches")) flags.limit_train_batches = non_negative("--limit-train-batches");
  if (args.is_set("--limit-val-batches")) flags.limit_val_batches = non_negative("--limit-val-batches");
  flags.tensorboard = args.get_switch("--tensorboard");
  flags.checkpoint_dir = args.get("--checkpoint-dir");
  if (args.is_set("--checkpoint-dir") && flags.checkpoint_dir.empty()) {
    throw volt::cli::UsageError("argument --checkpoint-dir: expected a folder");
  }
  const std::int64_t top_k = args.get_int("--save-top-k");
  if (top_k < -1 || top_k > 1000000) {
    throw volt::cli::UsageError("argument --save-top-k: expected -1 or a non-negative integer, got " +
                                std::to_string(top_k));
  }
  flags.save_top_k = static_cast<int>(top_k);
  if (args.is_set("--every-n-train-steps")) {
    flags.every_n_train_steps = args.get_int("--every-n-train-steps");
    if (*flags.every_n_train_steps < 1) {
      throw volt::cli::UsageError("argument --every-n-train-steps: expected a positive integer, got " +
                                  std::to_string(*flags.every_n_train_steps));
    }
  }
  flags.save_last = args.get_switch("--save-last");
  if (args.is_set("--save-weights")) {
    flags.save_weights = args.get("--save-weights");
    if (flags.save_weights.empty()) throw volt::cli::UsageError("argument --save-weights: expected a file name");
  }
  if (args.is_set("--mlflow-uri")) {
    flags.mlflow_uri = args.get("--mlflow-uri");
    if (!has_mlflow) {
      throw volt::cli::UsageError("argument --mlflow-uri: this build of the example has no MLflow logger: CMake did "
                                  "not find libcurl when it was configured (install libcurl4-openssl-dev, then "
                                  "configure and build again)");
    }
    if (flags.mlflow_uri.rfind("http://", 0) != 0 && flags.mlflow_uri.rfind("https://", 0) != 0) {
      throw volt::cli::UsageError("argument --mlflow-uri: expected the tracking server's http:// or https:// "
                                  "address, got '" + flags.mlflow_uri + "'");
    }
  }
  flags.mlflow_experiment = args.get("--mlflow-experiment");
  if (flags.mlflow_experiment.empty()) throw volt::cli::UsageError("argument --mlflow-experiment: expected a name");
  if (args.is_set("--lr-find")) {
    flags.lr_find_plot = args.get("--lr-find");
    if (flags.lr_find_plot.empty()) throw volt::cli::UsageError("argument --lr-find: expected a file name for the plot");
  }
  return flags;
}

/// Callback of --tensorboard: after each validation (not the sanity check) logs the first validation batch as
/// an image grid ("val/images", once) and the images of it the model gets wrong ("val/misclassified"), at the
/// global step, to the run's TensorBoardLogger.
template <class Model>
struct ValidationImages {
  std::shared_ptr<volt::TensorBoardLogger> logger;
  FashionMnistData* data = nullptr;
  /// The model, set once it is built (after the Trainer, which seeds).
  std::shared_ptr<std::shared_ptr<Model>> model = std::make_shared<std::shared_ptr<Model>>();
  std::shared_ptr<bool> logged_batch = std::make_shared<bool>(false);

  void on_validation_epoch_end(volt::TrainerState& state) {
    if (!logger || state.stage == volt::Stage::sanity_checking || !state.is_global_zero || !*model) return;
    auto loader = data->val_dataloader();
    for (auto& batch : loader) {
      torch::NoGradGuard no_grad;
      const auto images = (batch.data * 0.3530 + 0.2860).clamp(0.0, 1.0).reshape({-1, 1, 28, 28});
      const auto dtype = (*model)->parameters().front().scalar_type();  // fp16/bf16 with the *-true precisions
      const auto predicted = (*model)->forward(batch.data.to(state.root_device, dtype)).argmax(1).cpu();
      if (!*logged_batch) logger->log_images("val/images", images, state.global_step, {.nrow = 16});
      *logged_batch = true;
      const auto wrong = predicted.ne(batch.target).nonzero().flatten();
      if (wrong.numel() > 0) logger->log_images("val/misclassified", images.index_select(0, wrong), state.global_step);
      break;
    }
  }
};

/// Callback of --tensorboard: volt::HistogramMonitor when TensorBoard is on (it refuses a Trainer without a
/// TensorBoardLogger), nothing otherwise.
struct OptionalHistograms {
  std::optional<volt::HistogramMonitor> monitor;

  void on_fit_start(volt::TrainerState& state) {
    if (monitor) monitor->on_fit_start(state);
  }
  void on_before_optimizer_step(volt::TrainerState& state, torch::optim::Optimizer& optimizer) {
    if (monitor) monitor->on_before_optimizer_step(state, optimizer);
  }
};

/// Exit status after Ctrl+C or SIGTERM stopped the fit (the shell's 128 + SIGINT).
inline constexpr int interrupted_status = 130;

/// Trains the model `make_model()` builds with Trainer<Accelerator, Strategy, Precision> as the command line
/// says, prints the run's figures and the test accuracy, and returns the program's exit status (3 when the
/// accuracy is below --expect-test-acc, 130 when a signal stopped the fit: the test set is then not run).
/// The model is built after the Trainer has seeded (--seed), so a seed reproduces the whole run. Throws what
/// the data loader and the Trainer throw.
template <class Accelerator, class Strategy, class Precision, class MakeModel>
int fit_and_test(const volt::cli::Args& args, MakeModel&& make_model) {
  const auto flags = read_fashion_mnist_flags(args);
  const auto start = std::chrono::steady_clock::now();
  FashionMnistData data(args.get("--data-dir"), args.batch_size);

  volt::TrainerOptions options = args.trainer_options();
  options.enable_progress_bar = !args.get_switch("--no-progress-bar");
  if (flags.limit_train_batches) options.limit_train_batches = *flags.limit_train_batches;
  if (flags.limit_val_batches) options.limit_val_batches = *flags.limit_val_batches;
  // The loggers, chosen at run time: the CSVLogger, and TensorBoard's with --tensorboard (Lightning's
  // logger=[...]). The callbacks of --tensorboard do nothing without it.
  using Model = typename decltype(make_model())::element_type;
  std::vector<std::shared_ptr<volt::Logger>> loggers{std::make_shared<volt::CSVLogger>()};
  ValidationImages<Model> images;
  images.data = &data;
  OptionalHistograms histograms;
  if (flags.tensorboard) {
    images.logger = std::make_shared<volt::TensorBoardLogger>(volt::TensorBoardLoggerOptions{.name = "tensorboard"});
    loggers.push_back(images.logger);
    histograms.monitor.emplace(volt::HistogramMonitorOptions{.every_n_steps = 100});
  }
#if VOLT_EXAMPLES_MLFLOW
  // MLflow's run: the same metrics and hparams; the checkpoint ModelCheckpoint keeps is uploaded when fit ends.
  std::shared_ptr<volt::MLFlowLogger> mlflow;
  if (!flags.mlflow_uri.empty()) {
    mlflow = std::make_shared<volt::MLFlowLogger>(volt::MLFlowLoggerOptions{
        .experiment_name = flags.mlflow_experiment, .tracking_uri = flags.mlflow_uri, .log_model = volt::LogModel::on});
    loggers.push_back(mlflow);
  }
#endif
  // Not strict: a short run (--max-steps below one epoch) ends before the first validation, and Lightning's
  // strict EarlyStopping would then stop the program for the missing val_acc.
  volt::Trainer<Accelerator, Strategy, Precision> trainer(
      options,
      volt::ModelCheckpoint{{.dirpath = flags.checkpoint_dir,
                             .monitor = "val_acc",
                             .mode = "max",
                             .save_top_k = flags.save_top_k,
                             .save_last = flags.save_last,
                             .every_n_train_steps = flags.every_n_train_steps}},
      volt::EarlyStopping{{.monitor = "val_acc", .mode = "max", .patience = flags.patience, .strict = false}},
      loggers, images, histograms);
  auto model = make_model();  // after the Trainer seeded: the initial weights follow --seed
  *images.model = model;
  if (!flags.lr_find_plot.empty()) {
    // A model with a `lr` member trains with the suggestion (update_attr); others keep their rate.
    constexpr bool has_lr = requires { model->lr; };
    data.prepare_data();
    data.setup(volt::Stage::fitting);
    auto train_loader = data.train_dataloader();
    const auto found =
        volt::lr_find<Accelerator, Strategy, Precision>(options, model, train_loader, {.update_attr = has_lr});
    const auto plot = std::filesystem::path(flags.lr_find_plot);
    if (plot.has_parent_path()) std::filesystem::create_directories(plot.parent_path());
    found.write_svg(plot);
    const auto suggestion = found.suggestion();
    char suggested[32] = "none";
    if (suggestion) std::snprintf(suggested, sizeof(suggested), "%.4g", *suggestion);
    std::printf("lr_find: %zu steps%s, suggested learning rate %s, plot written to %s%s\n", found.losses.size(),
                found.stopped_early ? " (stopped early: the loss diverged)" : "", suggested,
                flags.lr_find_plot.c_str(), has_lr ? "" : " (this model's learning rate is fixed: not applied)");
  }

  const auto fit_start = std::chrono::steady_clock::now();
  trainer.fit(model, data, args.ckpt_path);
  if (trainer.interrupted()) {
    std::fprintf(stderr, "interrupted: %s; the test set was not run (resume with --ckpt-path)\n",
                 trainer.stop_reason().c_str());
    return interrupted_status;
  }
  const double fit_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - fit_start).count();
  if (!flags.save_weights.empty()) {
    volt::save_weights(model, flags.save_weights);
    std::printf("weights written to %s\n", flags.save_weights.c_str());
  }
  const auto results = trainer.test(model, data);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::printf("device: %s | precision: %s | epochs: %lld | steps: %lld | fit: %.1f s | wall time: %.1f s\n",
              trainer.root_device().str().c_str(), std::string(Precision::name).c_str(),
              static_cast<long long>(trainer.current_epoch()), static_cast<long long>(trainer.global_step()),
              fit_seconds, seconds);
  if (auto* checkpoint = trainer.checkpoint_callback(); checkpoint && !checkpoint->best_model_path().empty()) {
    std::printf("best checkpoint: %s (val_acc %.4f)\n", checkpoint->best_model_path().c_str(),
                checkpoint->best_model_score().value_or(0.0));
  }
  const double accuracy = results.at("test_acc");
  std::printf("test accuracy: %.4f\n", accuracy);
#if VOLT_EXAMPLES_MLFLOW
  if (mlflow) {
    std::printf("mlflow: run %s in experiment '%s' at %s%s\n", mlflow->run_id().empty() ? "(not created)" : mlflow->run_id().c_str(),
                flags.mlflow_experiment.c_str(), flags.mlflow_uri.c_str(),
                mlflow->pending() > 0 ? " (the server could not be reached: see the warnings)" : "");
  }
#endif
  const double expected = flags.expect_test_acc;
  if (accuracy < expected) {
    std::fprintf(stderr, "error: test accuracy %.4f is below the expected %.4f\n", accuracy, expected);
    return 3;
  }
  return 0;
}

}  // namespace examples

// The training program shared by the Fashion-MNIST examples: the flags they add to volt's command line,
// and fit on the data module (validation, early stopping, checkpoints, progress bar) followed by the test
// accuracy.
#pragma once

#include <volt/volt.hpp>

#include "fashion_mnist_data.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

namespace examples {

/// Adds the Fashion-MNIST examples' own flags to `parser`.
inline void add_fashion_mnist_flags(volt::cli::Parser& parser) {
  parser.add_option("--data-dir", "DIR", "folder with the four uncompressed IDX files (default: Debian's package, "
                                         "unpacked once into ~/.cache/volt/fashion-mnist)")
      .add_option("--limit-train-batches", "N", "training batches per epoch (default: all)")
      .add_option("--limit-val-batches", "N", "validation batches per epoch (default: all)")
      .add_option("--expect-test-acc", "A", "exit with status 3 when the test accuracy is below A", "0")
      .add_option("--patience", "N", "EarlyStopping patience in validation checks", "2")
      .add_option("--lr-find", "SVG", "run the learning-rate finder first (volt::lr_find, 100 steps), print its "
                                      "suggestion, write its plot to SVG and train with the suggestion")
      .add_switch("--no-progress-bar", "print no progress bar");
}

/// The examples' own flags, read and checked before anything runs: a bad value is a usage error naming the
/// flag (exit status 2), not a failure after training.
struct FashionMnistFlags {
  double expect_test_acc = 0.0;
  std::int64_t patience = 2;
  std::optional<std::int64_t> limit_train_batches;
  std::optional<std::int64_t> limit_val_batches;
  std::string lr_find_plot;
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
  if (args.is_set("--lr-find")) {
    flags.lr_find_plot = args.get("--lr-find");
    if (flags.lr_find_plot.empty()) throw volt::cli::UsageError("argument --lr-find: expected a file name for the plot");
  }
  return flags;
}

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
  // Not strict: a short run (--max-steps below one epoch) ends before the first validation, and Lightning's
  // strict EarlyStopping would then stop the program for the missing val_acc.
  volt::Trainer<Accelerator, Strategy, Precision> trainer(
      options, volt::ModelCheckpoint{{.monitor = "val_acc", .mode = "max"}},
      volt::EarlyStopping{
          {.monitor = "val_acc", .mode = "max", .patience = flags.patience, .strict = false}});
  auto model = make_model();  // after the Trainer seeded: the initial weights follow --seed
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
  const double expected = flags.expect_test_acc;
  if (accuracy < expected) {
    std::fprintf(stderr, "error: test accuracy %.4f is below the expected %.4f\n", accuracy, expected);
    return 3;
  }
  return 0;
}

}  // namespace examples

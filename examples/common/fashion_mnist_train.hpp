// The training program shared by the Fashion-MNIST examples: the flags they add to volt's command line,
// and fit (validation, early stopping, checkpoints, progress bar) followed by the test accuracy.
#pragma once

#include <volt/volt.hpp>

#include "fashion_mnist_data.hpp"

#include <chrono>
#include <cstdio>
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
      .add_switch("--no-progress-bar", "print no progress bar");
}

/// Trains `model` with Trainer<Accelerator, Strategy, Precision> as the command line says, prints the run's
/// figures and the test accuracy, and returns the program's exit status (3 when the accuracy is below
/// --expect-test-acc). Throws what the data loader and the Trainer throw.
template <class Accelerator, class Strategy, class Precision, class Model>
int fit_and_test(const volt::cli::Args& args, std::shared_ptr<Model> model) {
  const auto start = std::chrono::steady_clock::now();
  auto splits = load_fashion_mnist(args.get("--data-dir"));
  const auto train_batches = batches_per_epoch(splits.train, args.batch_size);
  const auto val_batches = batches_per_epoch(splits.val, args.batch_size);
  const auto test_batches = batches_per_epoch(splits.test, args.batch_size);
  auto loader_options = torch::data::DataLoaderOptions(static_cast<std::size_t>(args.batch_size));
  auto train_loader =
      torch::data::make_data_loader<torch::data::samplers::RandomSampler>(std::move(splits.train), loader_options);
  auto val_loader =
      torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(std::move(splits.val), loader_options);
  auto test_loader =
      torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(std::move(splits.test), loader_options);

  volt::TrainerOptions options = args.trainer_options();
  options.enable_progress_bar = !args.get_switch("--no-progress-bar");
  if (args.is_set("--limit-train-batches")) options.limit_train_batches = args.get_int("--limit-train-batches");
  if (args.is_set("--limit-val-batches")) options.limit_val_batches = args.get_int("--limit-val-batches");
  // Not strict: a short run (--max-steps below one epoch) ends before the first validation, and Lightning's
  // strict EarlyStopping would then stop the program for the missing val_acc.
  volt::Trainer<Accelerator, Strategy, Precision> trainer(
      options, volt::ModelCheckpoint{{.monitor = "val_acc", .mode = "max"}},
      volt::EarlyStopping{
          {.monitor = "val_acc", .mode = "max", .patience = args.get_int("--patience"), .strict = false}});

  const auto fit_start = std::chrono::steady_clock::now();
  trainer.fit(model, volt::sized(train_loader, train_batches), volt::sized(val_loader, val_batches),
              args.ckpt_path);
  const double fit_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - fit_start).count();
  const auto results = trainer.test(model, volt::sized(test_loader, test_batches));
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
  const double expected = args.get_double("--expect-test-acc");
  if (accuracy < expected) {
    std::fprintf(stderr, "error: test accuracy %.4f is below the expected %.4f\n", accuracy, expected);
    return 3;
  }
  return 0;
}

}  // namespace examples

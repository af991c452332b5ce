// Trains the MLP from volt's seeds on Fashion-MNIST with validation, early stopping and checkpoints,
// then reports the test accuracy. The accelerator is chosen at run time: MPS, then CUDA, then CPU.
//
//   ./fashion_mnist [--max-epochs 5] [--max-steps N] [--batch-size 128] [--data-dir DIR]
//                   [--limit-train-batches N] [--limit-val-batches N]
//                   [--precision 32-true|bf16-mixed|16-mixed] [--default-root-dir DIR] [--seed 42]
//                   [--expect-test-acc 0.88] [--no-progress-bar]
#include <volt/volt.hpp>

#include "../common/fashion_mnist_data.hpp"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>

// 784-256-256-10 with batch normalisation, ReLU and dropout 0.2.
struct FashionMLP : torch::nn::Module {
  torch::nn::Sequential net{torch::nn::Flatten(),
                            torch::nn::Linear(784, 256), torch::nn::BatchNorm1d(256), torch::nn::ReLU(), torch::nn::Dropout(0.2),
                            torch::nn::Linear(256, 256), torch::nn::BatchNorm1d(256), torch::nn::ReLU(), torch::nn::Dropout(0.2),
                            torch::nn::Linear(256, 10)};
  FashionMLP() { register_module("net", net); }

  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t, volt::StepContext& ctx) {
    auto loss = torch::nn::functional::cross_entropy(net->forward(batch.data), batch.target);
    ctx.log("train_loss", loss, {.prog_bar = true});
    return loss;
  }
  void validation_step(const torch::data::Example<>& batch, std::int64_t, volt::StepContext& ctx) {
    auto logits = net->forward(batch.data);
    ctx.log("val_loss", torch::nn::functional::cross_entropy(logits, batch.target));
    ctx.log("val_acc", logits.argmax(1).eq(batch.target).to(torch::kFloat).mean(), {.prog_bar = true});
  }
  void test_step(const torch::data::Example<>& batch, std::int64_t, volt::StepContext& ctx) {
    ctx.log("test_acc", net->forward(batch.data).argmax(1).eq(batch.target).to(torch::kFloat).mean());
  }
  volt::OptimizerConfig configure_optimizers() {
    auto optimizer = std::make_shared<torch::optim::Adam>(parameters(), torch::optim::AdamOptions(1e-3));
    return {optimizer, std::make_shared<torch::optim::StepLR>(*optimizer, 3, 0.5)};
  }
};

struct Settings {
  std::int64_t max_epochs = 5, max_steps = -1, batch_size = 128, limit_train_batches = -1, limit_val_batches = -1;
  std::uint64_t seed = 42;
  std::string data_dir, root_dir, precision = "32-true";
  double expect_test_acc = 0.0;
  bool progress_bar = true;
};

template <class Precision>
int train(const Settings& settings) {
  const auto start = std::chrono::steady_clock::now();
  auto splits = examples::load_fashion_mnist(settings.data_dir);
  const auto train_batches = examples::batches_per_epoch(splits.train, settings.batch_size);
  const auto val_batches = examples::batches_per_epoch(splits.val, settings.batch_size);
  const auto test_batches = examples::batches_per_epoch(splits.test, settings.batch_size);
  auto options = torch::data::DataLoaderOptions(settings.batch_size);
  auto train_loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(std::move(splits.train), options);
  auto val_loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(std::move(splits.val), options);
  auto test_loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(std::move(splits.test), options);

  volt::TrainerOptions trainer_options{.max_epochs = settings.max_epochs, .max_steps = settings.max_steps,
                                       .seed = settings.seed, .default_root_dir = settings.root_dir,
                                       .enable_progress_bar = settings.progress_bar};
  if (settings.limit_train_batches >= 0) trainer_options.limit_train_batches = settings.limit_train_batches;
  if (settings.limit_val_batches >= 0) trainer_options.limit_val_batches = settings.limit_val_batches;
  volt::Trainer<volt::Auto, volt::SingleDevice, Precision> trainer(
      trainer_options,
      volt::ModelCheckpoint{{.monitor = "val_acc", .mode = "max"}},
      volt::EarlyStopping{{.monitor = "val_acc", .mode = "max", .patience = 2}});
  auto model = std::make_shared<FashionMLP>();
  const auto fit_start = std::chrono::steady_clock::now();
  trainer.fit(model, volt::sized(train_loader, train_batches), volt::sized(val_loader, val_batches));
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
  if (accuracy < settings.expect_test_acc) {
    std::fprintf(stderr, "error: test accuracy %.4f is below the expected %.4f\n", accuracy, settings.expect_test_acc);
    return 3;
  }
  return 0;
}

int main(int argc, char** argv) {
  Settings settings;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "error: " << flag << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    try {
      if (flag == "--max-epochs") settings.max_epochs = std::stoll(value());
      else if (flag == "--max-steps") settings.max_steps = std::stoll(value());
      else if (flag == "--batch-size") settings.batch_size = std::stoll(value());
      else if (flag == "--limit-train-batches") settings.limit_train_batches = std::stoll(value());
      else if (flag == "--limit-val-batches") settings.limit_val_batches = std::stoll(value());
      else if (flag == "--seed") settings.seed = std::stoull(value());
      else if (flag == "--data-dir") settings.data_dir = value();
      else if (flag == "--default-root-dir") settings.root_dir = value();
      else if (flag == "--precision") settings.precision = value();
      else if (flag == "--expect-test-acc") settings.expect_test_acc = std::stod(value());
      else if (flag == "--no-progress-bar") settings.progress_bar = false;
      else if (flag == "--help" || flag == "-h") {
        std::cout << "usage: fashion_mnist [--max-epochs N] [--max-steps N] [--batch-size N] [--data-dir DIR]\n"
                     "                     [--limit-train-batches N] [--limit-val-batches N]\n"
                     "                     [--precision 32-true|bf16-mixed|16-mixed] [--default-root-dir DIR]\n"
                     "                     [--seed N] [--expect-test-acc A] [--no-progress-bar]\n";
        return 0;
      } else {
        std::cerr << "error: unknown flag " << flag << " (see --help)\n";
        return 2;
      }
    } catch (const std::logic_error&) {
      std::cerr << "error: " << flag << " needs a number\n";
      return 2;
    }
  }
  try {
    if (settings.precision == "32-true" || settings.precision == "32") return train<volt::FP32>(settings);
    if (settings.precision == "bf16-mixed" || settings.precision == "bf16") return train<volt::BF16Autocast>(settings);
    if (settings.precision == "16-mixed" || settings.precision == "16") return train<volt::FP16Autocast>(settings);
    std::cerr << "error: --precision " << settings.precision << " is not one of 32-true, bf16-mixed, 16-mixed\n";
    return 2;
  } catch (const std::exception& error) {
    std::cerr << "error: " << error.what() << '\n';
    return 1;
  }
}

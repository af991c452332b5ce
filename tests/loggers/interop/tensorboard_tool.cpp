// Helper program for tests/python/check_tensorboard.py: writes a TensorBoard event file with known content.
//
//   tensorboard_tool <save_dir>
//
// Writes <save_dir>/lightning_logs/version_<N>/events.out.tfevents.* with hyperparameters
// {lr: 0.001, optimizer: adam, layers: 3, shuffle: true}, hp_metric = -1 at step 0, and for steps 0..9:
// train_loss = 1 / (step + 1) and, on even steps, val_acc = step / 10; an RGB image "sample" (3 x 4 x 5, uint8
// value 20 c + 5 y + x) at step 2; a grid "batch" of three 1 x 2 x 2 float images (k / 4 + 0.1 * (2 y + x),
// nrow 2, padding 1) at step 4; a histogram "weights" of 0.0, 0.1, ..., 9.9 with 10 bins at step 3; the text
// "notes" ("**bold** and plain") at step 1. Prints the event file's path.
//
//   tensorboard_tool demo <save_dir>
//
// Writes a richer run for the screenshot in docs/ (docs/loggers.md says how it is taken): 50 steps of
// scalars, a grid of 16 drawn 28 x 28 RGB discs at steps 0, 25 and 49, histograms of a narrowing normal
// distribution every 5 steps, a text and hyperparameters.
#include <torch/torch.h>

#include <volt/volt.hpp>

#include <cmath>
#include <iostream>
#include <map>
#include <string>
#include <vector>

namespace {

/// 16 images (16, 3, 28, 28): discs of growing radius and changing colour, brighter as `phase` (0..1) grows.
torch::Tensor discs(double phase) {
  const auto y = torch::arange(28, torch::kFloat).view({28, 1}), x = torch::arange(28, torch::kFloat).view({1, 28});
  std::vector<torch::Tensor> images;
  for (int k = 0; k < 16; ++k) {
    const auto inside = ((y - 13.5).square() + (x - 13.5).square() < (3.0 + 0.6 * k) * (3.0 + 0.6 * k)).to(torch::kFloat);
    const auto colour = torch::tensor({0.3F + 0.04F * static_cast<float>(k), 0.9F - 0.05F * static_cast<float>(k), 0.5F});
    images.push_back(inside.unsqueeze(0) * colour.view({3, 1, 1}) * static_cast<float>(0.4 + 0.6 * phase));
  }
  return torch::stack(images);
}

void demo(const std::string& save_dir) {
  volt::TensorBoardLogger logger({.save_dir = save_dir, .name = "demo"});
  logger.log_hyperparams({{"lr", "0.001"}, {"optimizer", "adam"}, {"batch_size", "64"}}, {{"val_acc", 0.0}});
  torch::manual_seed(0);
  for (int step = 0; step < 50; ++step) {
    std::map<std::string, double> metrics{{"train_loss", 2.3 * std::exp(-step / 15.0) + 0.05 * std::sin(step)}};
    if (step % 5 == 4) metrics["val_acc"] = 0.95 - 0.6 * std::exp(-step / 12.0);
    logger.log_metrics(metrics, step);
    if (step % 5 == 0) logger.log_histogram("fc1.weight", torch::randn({4096}) * (1.0 - step / 100.0) + step / 50.0, step);
  }
  for (const int step : {0, 25, 49}) logger.log_images("samples", discs(step / 49.0), step, {.nrow = 8});
  logger.log_text("notes", "Fashion-MNIST-sized **28 x 28** images, written by volt's TensorBoardLogger.", 0);
  logger.finalize("success");
  std::cout << logger.event_file().string() << '\n';
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "demo") {
    try {
      demo(argv[2]);
    } catch (const std::exception& error) {
      std::cerr << error.what() << '\n';
      return 1;
    }
    return 0;
  }
  if (argc != 2) {
    std::cerr << "usage: tensorboard_tool SAVE_DIR | demo SAVE_DIR\n";
    return 2;
  }
  try {
    volt::TensorBoardLogger logger({.save_dir = argv[1]});
    logger.log_hyperparams({{"lr", "0.001"}, {"optimizer", "adam"}, {"layers", "3"}, {"shuffle", "true"}});
    for (int step = 0; step < 10; ++step) {
      std::map<std::string, double> metrics{{"train_loss", 1.0 / (step + 1)}};
      if (step % 2 == 0) metrics["val_acc"] = step / 10.0;
      logger.log_metrics(metrics, step);
    }
    logger.log_image("sample", (torch::arange(3).view({3, 1, 1}) * 20 + torch::arange(4).view({1, 4, 1}) * 5 +
                                torch::arange(5).view({1, 1, 5})).to(torch::kByte), 2);
    const auto yx = (torch::arange(2).view({2, 1}) * 2 + torch::arange(2).view({1, 2})).to(torch::kFloat) * 0.1;
    logger.log_images("batch", torch::stack({yx, yx + 0.25, yx + 0.5}).unsqueeze(1), 4, {.nrow = 2, .padding = 1});
    logger.log_histogram("weights", torch::arange(100, torch::kDouble) / 10.0, 3, 10);
    logger.log_text("notes", "**bold** and plain", 1);
    logger.finalize("success");
    std::cout << logger.event_file().string() << '\n';
  } catch (const std::exception& error) {
    std::cerr << error.what() << '\n';
    return 1;
  }
  return 0;
}

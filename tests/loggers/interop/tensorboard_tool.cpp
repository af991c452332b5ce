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
#include <torch/torch.h>

#include <volt/volt.hpp>

#include <iostream>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: tensorboard_tool SAVE_DIR\n";
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

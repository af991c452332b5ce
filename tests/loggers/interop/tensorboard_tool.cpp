// Helper program for tests/python/check_tensorboard.py: writes a TensorBoard event file with known content.
//
//   tensorboard_tool <save_dir>
//
// Writes <save_dir>/lightning_logs/version_<N>/events.out.tfevents.* with hyperparameters
// {lr: 0.001, optimizer: adam, layers: 3, shuffle: true}, hp_metric = -1 at step 0, and for steps 0..9:
// train_loss = 1 / (step + 1) and, on even steps, val_acc = step / 10. Prints the event file's path.
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
    logger.finalize("success");
    std::cout << logger.event_file().string() << '\n';
  } catch (const std::exception& error) {
    std::cerr << error.what() << '\n';
    return 1;
  }
  return 0;
}

// Helper program for tests/python/check_mlflow.py: the C++ side of the MLflow exchange.
//
//   mlflow_tool run <tracking_uri> <artifact_file>
//       experiment "volt-check", run "first" with tags {team: ml}, params {lr: 0.001, optimizer: adam},
//       loss = 1 / (step + 1) at steps 0..4, val_acc = 0.5 at step 4, <artifact_file> uploaded under
//       "checkpoints", status FINISHED. Prints the run id.
//   mlflow_tool unreachable <tracking_uri>
//       the same logging against a server that is down or answers 500: must return normally (exit 0) after
//       warnings; prints the number of warnings and the requests still pending before finalize.
#include <torch/torch.h>

#include <volt/volt.hpp>
#include <volt/loggers/mlflow_logger.hpp>

#include <iostream>
#include <string>
#include <vector>

namespace {

void log_run(volt::MLFlowLogger& logger) {
  logger.log_hyperparams({{"lr", "0.001"}, {"optimizer", "adam"}});
  for (int step = 0; step < 5; ++step) {
    std::map<std::string, double> metrics{{"loss", 1.0 / (step + 1)}};
    if (step == 4) metrics["val_acc"] = 0.5;
    logger.log_metrics(metrics, step);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "run" && argc == 4) {
      volt::MLFlowLogger logger({.experiment_name = "volt-check", .run_name = "first", .tracking_uri = argv[2],
                                 .tags = {{"team", "ml"}}});
      log_run(logger);
      logger.log_artifact(argv[3], "checkpoints");
      logger.finalize("success");
      std::cout << logger.run_id() << '\n';
    } else if (mode == "unreachable" && argc == 3) {
      std::vector<std::string> warnings;
      volt::log::set_sink([&](volt::log::Level level, std::string_view text) {
        if (level == volt::log::Level::warning) warnings.emplace_back(text);
        std::cerr << text << '\n';
      });
      volt::MLFlowLogger logger({.tracking_uri = argv[2], .request_timeout_s = 1.0, .retry_backoff_s = 0.05});
      log_run(logger);
      const auto pending = logger.pending();
      logger.finalize("success");
      std::cout << warnings.size() << ' ' << pending << '\n';
    } else {
      std::cerr << "usage: mlflow_tool run URI FILE | unreachable URI\n";
      return 2;
    }
  } catch (const std::exception& error) {
    std::cerr << "exception: " << error.what() << '\n';
    return 1;
  }
  return 0;
}

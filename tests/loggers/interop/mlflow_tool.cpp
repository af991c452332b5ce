// Helper program for tests/python/check_mlflow.py: the C++ side of the MLflow exchange.
//
//   mlflow_tool run <tracking_uri> <artifact_file>
//       experiment "volt-check", run "first" with tags {team: ml}, params {lr: 0.001, optimizer: adam},
//       loss = 1 / (step + 1) at steps 0..4, val_acc = 0.5 at step 4, <artifact_file> uploaded under
//       "checkpoints", status FINISHED. Prints the run id.
//   mlflow_tool log_model {on|all} <tracking_uri> <folder>
//       log_model as ModelCheckpoint(monitor="val_acc", mode="max", save_top_k=1, save_last=True) drives it:
//       after the first save <folder> holds epoch=0-step=2.ckpt (val_acc 0.5) and last.ckpt; after the second
//       epoch=1-step=4.ckpt (0.75) replaced it and last.ckpt was written again. Prints the run id.
//   mlflow_tool unreachable <tracking_uri>
//       the same logging against a server that is down or answers 500: must return normally (exit 0) after
//       warnings; prints the number of warnings and the requests still pending before finalize.
#include <torch/torch.h>

#include <volt/volt.hpp>
#include <volt/loggers/mlflow_logger.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>
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

void write(const std::filesystem::path& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

int log_model(const std::string& how, const std::string& uri, const std::filesystem::path& folder) {
  volt::MLFlowLogger logger({.experiment_name = "volt-log-model", .tracking_uri = uri,
                             .log_model = how == "all" ? volt::LogModel::all : volt::LogModel::on});
  log_run(logger);
  std::filesystem::create_directories(folder);
  volt::SavedCheckpoints saved{.monitor = "val_acc", .mode = "max", .save_last = true, .save_top_k = 1};
  const auto first = folder / "epoch=0-step=2.ckpt", second = folder / "epoch=1-step=4.ckpt", last = folder / "last.ckpt";
  write(first, "first");
  saved.best_model_path = first;
  saved.best_model_score = saved.current_score = 0.5;
  saved.best_k_models = {{first, 0.5}};
  logger.after_save_checkpoint(saved);
  write(last, "last after epoch 0");
  saved.last_model_path = last;
  logger.after_save_checkpoint(saved);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a later modification time for last.ckpt
  write(second, "second");
  std::filesystem::remove(first);
  saved.best_model_path = second;
  saved.best_model_score = saved.current_score = 0.75;
  saved.best_k_models = {{second, 0.75}};
  logger.after_save_checkpoint(saved);
  write(last, "last after epoch 1");
  logger.after_save_checkpoint(saved);
  logger.finalize("success");
  std::cout << logger.run_id() << '\n';
  return 0;
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
    } else if (mode == "log_model" && argc == 5) {
      return log_model(argv[2], argv[3], argv[4]);
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
      std::cerr << "usage: mlflow_tool run URI FILE | log_model {on|all} URI FOLDER | unreachable URI\n";
      return 2;
    }
  } catch (const std::exception& error) {
    std::cerr << "exception: " << error.what() << '\n';
    return 1;
  }
  return 0;
}

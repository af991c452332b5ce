// Helper program for tests/python/check_checkpoint.py: the C++ side of the checkpoint exchange with Python.
//
//   checkpoint_tool fit <dir>                 trains Net for 2 epochs of 6 batches (Adam, StepLR, a top-2
//                                             ModelCheckpoint on train_loss and last.ckpt in <dir>/ckpt), then
//                                             writes the final weights to <dir>/final.pt and Net's eval output on
//                                             the reference input to <dir>/output.pt ({"output": y})
//   checkpoint_tool resume <dir>              resumes the same fit from <dir>/ckpt/last.ckpt for a third epoch
//                                             and writes <dir>/resumed.pt (the weights)
//   checkpoint_tool lightning <in.ckpt> <out.pt>
//                                             loads a Lightning checkpoint's state_dict strictly into Net
//                                             (volt::load_weights) and writes Net's eval output ({"output": y})
//   checkpoint_tool resume-error <in.ckpt>    prints the error of resuming a fit from <in.ckpt>
#include <torch/torch.h>

#include <volt/volt.hpp>

#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

namespace {

/// Python: nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3), nn.ReLU(), nn.Linear(3, 2)) held as `net`.
struct Net : torch::nn::Module {
  torch::nn::Sequential net{torch::nn::Linear(4, 3), torch::nn::BatchNorm1d(3), torch::nn::ReLU(), torch::nn::Linear(3, 2)};
  Net() { register_module("net", net); }
  torch::Tensor forward(const torch::Tensor& x) { return net->forward(x); }
  std::map<std::string, std::string> hparams() const { return {{"hidden", "3"}, {"lr", "0.01"}}; }
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t, volt::StepContext& ctx) {
    auto loss = torch::nn::functional::cross_entropy(forward(batch.data), batch.target);
    ctx.log("train_loss", loss, {.on_step = true, .on_epoch = true});
    return loss;
  }
  volt::OptimizerConfig configure_optimizers() {
    auto optimizer = std::make_shared<torch::optim::Adam>(parameters(), torch::optim::AdamOptions(1e-2));
    return {optimizer, std::make_shared<torch::optim::StepLR>(*optimizer, 1, 0.5), volt::SchedulerInterval::epoch};
  }
};

std::vector<torch::data::Example<>> batches() {
  torch::manual_seed(11);
  std::vector<torch::data::Example<>> result;
  for (int i = 0; i < 6; ++i) result.emplace_back(torch::randn({8, 4}), torch::randint(0, 2, {8}, torch::kLong));
  return result;
}

torch::Tensor reference_input() { return torch::arange(20, torch::kFloat).reshape({5, 4}) / 10.0 - 1.0; }

void write_output(Net& model, const std::filesystem::path& path) {
  model.eval();
  torch::NoGradGuard no_grad;
  volt::StateDict out;
  out.insert("output", model.forward(reference_input()));
  volt::save_weights(out, path);
}

void fit(const std::filesystem::path& dir, std::int64_t epochs, bool resume) {
  torch::manual_seed(5);
  auto model = std::make_shared<Net>();
  volt::Trainer<volt::CPU> trainer(
      {.max_epochs = epochs, .default_root_dir = (dir / "logs").string(), .enable_progress_bar = false,
       .enable_model_summary = false},
      volt::ModelCheckpoint{{.dirpath = dir / "ckpt", .monitor = "train_loss", .save_top_k = 2, .save_last = true}});
  if (resume) {
    trainer.fit(model, batches(), dir / "ckpt" / "last.ckpt");
    volt::save_weights(model, dir / "resumed.pt");
  } else {
    trainer.fit(model, batches());
    volt::save_weights(model, dir / "final.pt");
    write_output(*model, dir / "output.pt");
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "fit" && argc == 3) {
      fit(argv[2], 2, false);
    } else if (mode == "resume" && argc == 3) {
      fit(argv[2], 3, true);
    } else if (mode == "lightning" && argc == 4) {
      Net model;
      volt::load_weights(model, argv[2]);
      write_output(model, argv[3]);
    } else if (mode == "resume-error" && argc == 3) {
      auto model = std::make_shared<Net>();
      volt::Trainer<volt::CPU> trainer({.max_epochs = 1, .enable_progress_bar = false, .enable_checkpointing = false,
                                        .enable_model_summary = false, .logger = false});
      try {
        trainer.fit(model, batches(), std::filesystem::path(argv[2]));
      } catch (const volt::CheckpointError& error) {
        std::cout << error.what() << '\n';
        return 0;
      }
      std::cerr << "expected an error\n";
      return 1;
    } else {
      std::cerr << "usage: checkpoint_tool fit DIR | resume DIR | lightning IN OUT | resume-error IN\n";
      return 2;
    }
  } catch (const std::exception& error) {
    std::cerr << error.what() << '\n';
    return 1;
  }
  return 0;
}

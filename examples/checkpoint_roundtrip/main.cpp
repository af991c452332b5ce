// Train on the accelerator, save a checkpoint, load it onto the CPU and continue training there, then
// export the weights for Python. Checkpoints hold CPU copies of every tensor (as Lightning's do), so a
// checkpoint written on a GPU resumes on any device; the weights file is a plain state_dict that Python's
// torch.load reads. Under DDP (--devices 2) every rank trains; global rank 0 alone resumes and exports.
//
//   ./checkpoint_roundtrip --accelerator cuda --max-steps 100
//   python3 -c "import torch; print(list(torch.load('roundtrip/weights.pt')))"
#include <volt/volt.hpp>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace {

/// A small classifier of points in 8 dimensions into 4 classes.
struct Classifier : torch::nn::Module {
  torch::nn::Sequential net{torch::nn::Linear(8, 64), torch::nn::ReLU(), torch::nn::Linear(64, 4)};
  Classifier() { register_module("net", net); }

  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t, volt::StepContext& ctx) {
    auto loss = torch::nn::functional::cross_entropy(net->forward(batch.data), batch.target);
    ctx.log("train_loss", loss);
    return loss;
  }
  void validation_step(const torch::data::Example<>& batch, std::int64_t, volt::StepContext& ctx) {
    ctx.log("val_acc", net->forward(batch.data).argmax(1).eq(batch.target).to(torch::kFloat).mean());
  }
  volt::OptimizerConfig configure_optimizers() {
    return {std::make_shared<torch::optim::Adam>(parameters(), torch::optim::AdamOptions(1e-2))};
  }
};

/// Points labelled by which of four fixed directions they lie closest to, in batches.
std::vector<torch::data::Example<>> make_batches(std::int64_t samples, std::int64_t batch_size, std::uint64_t seed) {
  torch::manual_seed(0);  // the same four directions for every set
  const auto directions = torch::randn({8, 4});
  torch::manual_seed(seed);
  const auto inputs = torch::randn({samples, 8});
  const auto labels = inputs.mm(directions).argmax(1);
  std::vector<torch::data::Example<>> batches;
  for (std::int64_t start = 0; start < samples; start += batch_size) {
    batches.push_back({inputs.slice(0, start, start + batch_size), labels.slice(0, start, start + batch_size)});
  }
  return batches;
}

double accuracy(Classifier& model, const std::vector<torch::data::Example<>>& batches) {
  torch::NoGradGuard no_grad;
  model.eval();
  double correct = 0, total = 0;
  for (const auto& batch : batches) {
    const auto data = batch.data.to(model.parameters().front().device());
    correct += model.net->forward(data).argmax(1).cpu().eq(batch.target).sum().item<double>();
    total += static_cast<double>(batch.target.size(0));
  }
  model.train();
  return correct / total;
}

}  // namespace

int main(int argc, char** argv) {
  volt::cli::Parser parser("checkpoint_roundtrip", "Trains on the accelerator, resumes on the CPU, exports weights.");
  parser.defaults().max_steps = 100;
  parser.defaults().batch_size = 64;
  parser.defaults().seed = 7;
  parser.defaults().default_root_dir = "roundtrip";
  return volt::cli::run(parser, argc, argv, [&]<class A, class S, class P>(volt::cli::Args& args) {
    const std::filesystem::path root = args.default_root_dir;
    std::filesystem::create_directories(root);
    const auto train = make_batches(4096, args.batch_size, 1);
    const auto val = make_batches(1024, args.batch_size, 2);

    // 1. Train on the accelerator the flags chose.
    auto options = args.trainer_options();
    options.enable_progress_bar = false;
    options.enable_checkpointing = false;
    volt::Trainer<A, S, P> trainer(options);
    auto model = std::make_shared<Classifier>();
    trainer.fit(model, train, val, args.ckpt_path);
    const auto checkpoint = root / "trained.ckpt";
    trainer.save_checkpoint(checkpoint);
    const double trained_accuracy = accuracy(*model, val);
    std::printf("1. trained on %s (%s): %lld steps, val accuracy %.4f, saved %s\n",
                trainer.root_device().str().c_str(), std::string(P::name).c_str(),
                static_cast<long long>(trainer.global_step()), trained_accuracy, checkpoint.string().c_str());

    // Under DDP every rank has trained and holds the same weights; the rest is one process's work, and only
    // global rank 0 writes files (two ranks would write the same paths).
    if (!trainer.is_global_zero()) return 0;

    // 2. Load it with the CPU as the target and continue: the step count goes on from the checkpoint's.
    volt::TrainerOptions cpu_options = options;
    cpu_options.devices = 1;
    cpu_options.max_steps = trainer.global_step() + args.max_steps;
    cpu_options.max_epochs = -1;
    volt::Trainer<volt::CPU, volt::SingleDevice, volt::FP32> cpu_trainer(cpu_options);
    auto resumed = std::make_shared<Classifier>();
    cpu_trainer.fit(resumed, train, val, checkpoint);
    std::printf("2. resumed on %s from step %lld to step %lld, val accuracy %.4f\n",
                cpu_trainer.root_device().str().c_str(), static_cast<long long>(trainer.global_step()),
                static_cast<long long>(cpu_trainer.global_step()), accuracy(*resumed, val));

    // 3. Export the weights for Python (a state_dict file that torch.load reads).
    const auto weights = root / "weights.pt";
    volt::save_weights(resumed, weights);
    std::printf("3. exported weights: %s\n   python3 -c \"import torch; sd = torch.load('%s'); print({k: "
                "tuple(v.shape) for k, v in sd.items()})\"\n",
                weights.string().c_str(), weights.string().c_str());
    return 0;
  });
}

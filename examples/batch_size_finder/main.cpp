// Finds the largest batch size that fits in the accelerator's memory (Lightning's
// Tuner.scale_batch_size, "power" mode): a few training steps at 2, 4, 8, ... samples per batch until the
// device runs out of memory, then a short training run with the size found.
//
// On a GPU the search stops at the real out-of-memory error. On the CPU, where running out of memory
// would take the whole machine down, the search stops at --max-batch-size, or at the out-of-memory error
// that --simulated-memory-mb raises when a batch's activations would exceed that budget.
//
//   ./batch_size_finder --accelerator cuda --hidden 8192
//   ./batch_size_finder --simulated-memory-mb 64
#include <volt/volt.hpp>

#include <cstdio>
#include <string>
#include <vector>

namespace {

/// An MLP whose activations grow with the batch: 784 -> hidden -> hidden -> 10.
struct WideMLP : torch::nn::Module {
  WideMLP(std::int64_t hidden, std::int64_t simulated_budget_bytes)
      : net(torch::nn::Linear(784, hidden), torch::nn::ReLU(), torch::nn::Linear(hidden, hidden), torch::nn::ReLU(),
            torch::nn::Linear(hidden, 10)),
        hidden(hidden),
        budget(simulated_budget_bytes) {
    register_module("net", net);
  }

  /// Bytes of activations and their gradients one sample needs (float32).
  std::int64_t bytes_per_sample() const { return 2 * 4 * (784 + 4 * hidden + 10); }

  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t, volt::StepContext& ctx) {
    const std::int64_t needed = batch.data.size(0) * bytes_per_sample();
    if (budget > 0 && needed > budget) {
      // What the CUDA caching allocator throws: the finder treats both the same way.
      throw c10::OutOfMemoryError({__func__, __FILE__, static_cast<std::uint32_t>(__LINE__)},
                                  "simulated out of memory: the batch needs " + std::to_string(needed >> 20) +
                                      " MiB of the " + std::to_string(budget >> 20) + " MiB budget");
    }
    auto loss = torch::nn::functional::cross_entropy(net->forward(batch.data), batch.target);
    ctx.log("train_loss", loss, {.prog_bar = true});
    return loss;
  }
  volt::OptimizerConfig configure_optimizers() {
    return {std::make_shared<torch::optim::Adam>(parameters(), torch::optim::AdamOptions(1e-3))};
  }

  torch::nn::Sequential net;
  std::int64_t hidden;
  std::int64_t budget;
};

}  // namespace

int main(int argc, char** argv) {
  volt::cli::Parser parser("batch_size_finder", "Finds the largest batch size that fits, then trains with it.");
  parser.defaults().max_steps = 20;
  // One device: the search runs in one process (Lightning refuses to tune the batch size under DDP).
  parser.defaults().devices = "1";
  parser.add_option("--hidden", "N", "width of the two hidden layers", "1024")
      .add_option("--max-batch-size", "N", "largest size tried on the CPU (0: no bound)", "4096")
      .add_option("--simulated-memory-mb", "MB", "pretend the device has this much memory for activations (0: off)",
                  "0")
      .add_option("--init-val", "N", "first batch size tried", "2")
      .add_option("--steps-per-trial", "N", "training steps at each size", "3");
  // The finder's trials and the final run use the same Trainer types: fewer policies, less to compile; no
  // DDP, which the finder refuses.
  using Compiled = volt::cli::Choices<volt::cli::default_accelerators, volt::cli::type_list<volt::SingleDevice>,
                                      volt::cli::type_list<volt::FP32, volt::BF16Autocast, volt::FP16Autocast>>;
  return volt::cli::run<Compiled>(parser, argc, argv, [&]<class A, class S, class P>(volt::cli::Args& args) {
    const auto hidden = args.get_int("--hidden");
    const auto budget = args.get_int("--simulated-memory-mb") << 20;
    const torch::Device device = A::get_parallel_devices(args.device_ids).front();
    // One random batch made on the device, served steps-per-trial times: no host copies in the way.
    auto make_batches = [&](std::int64_t batch_size) {
      const auto on_device = torch::TensorOptions().device(device);
      torch::data::Example<> batch{torch::randn({batch_size, 784}, on_device),
                                   torch::randint(10, {batch_size}, on_device.dtype(torch::kLong))};
      return std::vector<torch::data::Example<>>(static_cast<std::size_t>(args.get_int("--steps-per-trial")), batch);
    };
    volt::BatchSizeFinderOptions finder{.steps_per_trial = args.get_int("--steps-per-trial"),
                                        .init_val = args.get_int("--init-val")};
    if (device.is_cpu() && args.get_int("--max-batch-size") > 0) finder.max_val = args.get_int("--max-batch-size");

    const auto found = volt::scale_batch_size<A, S, P>(
        args.trainer_options(), [&] { return std::make_shared<WideMLP>(hidden, budget); }, make_batches, finder);
    std::printf("trials:");
    for (const auto& trial : found.trials) std::printf(" %lld%s", static_cast<long long>(trial.batch_size), trial.fits ? "" : "(OOM)");
    std::printf("\nlargest batch size that fits on %s: %lld%s\n", device.str().c_str(),
                static_cast<long long>(found.batch_size),
                found.hit_out_of_memory ? "" : " (the search stopped before running out of memory)");

    // Train with it.
    auto options = args.trainer_options();
    options.enable_progress_bar = false;
    options.enable_checkpointing = false;
    volt::Trainer<A, S, P> trainer(options);
    auto model = std::make_shared<WideMLP>(hidden, budget);
    auto batches = make_batches(found.batch_size);
    trainer.fit(model, batches);
    std::printf("trained %lld steps with batch size %lld, train_loss %.4f\n",
                static_cast<long long>(trainer.global_step()), static_cast<long long>(found.batch_size),
                trainer.callback_metrics()["train_loss"]);
    return 0;
  });
}

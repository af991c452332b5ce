// Trains a GAN on Fashion-MNIST with manual optimization: a generator and a discriminator, each with its own
// Adam, stepped in turn in training_step (Lightning's manual optimization with two optimizers). After every
// epoch a callback writes a PNG grid of 64 images generated from fixed noise to <log dir>/samples/.
//
//   ./fashion_mnist_gan                                  # 10 epochs on the CPU or the GPU volt::Auto picks
//   ./fashion_mnist_gan --accelerator cuda --precision bf16-mixed
//   ./fashion_mnist_gan --max-steps 20 --limit-train-batches 10 --no-progress-bar   # a short run
#include <volt/volt.hpp>

#include "../common/fashion_mnist_data.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

// A fully connected GAN: 64-d noise -> 256 -> 512 -> 784 (tanh) images; 784 -> 512 -> 256 -> 1 logits.
struct Gan : torch::nn::Module {
  static constexpr bool automatic_optimization = false;  // Lightning's self.automatic_optimization = False
  static constexpr std::int64_t latent = 64;
  torch::nn::Sequential generator{torch::nn::Linear(latent, 256), torch::nn::ReLU(), torch::nn::Linear(256, 512),
                                  torch::nn::ReLU(), torch::nn::Linear(512, 784), torch::nn::Tanh()};
  torch::nn::Sequential discriminator{torch::nn::Flatten(), torch::nn::Linear(784, 512),
                                      torch::nn::LeakyReLU(torch::nn::LeakyReLUOptions().negative_slope(0.2)),
                                      torch::nn::Linear(512, 256),
                                      torch::nn::LeakyReLU(torch::nn::LeakyReLUOptions().negative_slope(0.2)),
                                      torch::nn::Linear(256, 1)};
  Gan() {
    register_module("generator", generator);
    register_module("discriminator", discriminator);
  }

  /// Images in [-1, 1], N x 1 x 28 x 28.
  torch::Tensor generate(const torch::Tensor& noise) { return generator->forward(noise).view({-1, 1, 28, 28}); }

  void training_step(const torch::data::Example<>& batch, std::int64_t, volt::StepContext& ctx) {
    auto& opt_g = ctx.optimizer(0);
    auto& opt_d = ctx.optimizer(1);
    // The loader's images are normalised with Fashion-MNIST's mean and deviation; the generator makes [-1, 1].
    const auto real = (batch.data * 0.3530 + 0.2860) * 2.0 - 1.0;
    const auto fake = generate(torch::randn({real.size(0), latent}, real.options()));

    // The discriminator: real images towards 1, generated ones towards 0 (softplus(-x) = BCE with target 1).
    auto loss_d = torch::softplus(-discriminator->forward(real)).mean() +
                  torch::softplus(discriminator->forward(fake.detach())).mean();
    opt_d.zero_grad();
    ctx.manual_backward(loss_d);
    opt_d.step();

    // The generator: make the discriminator say 1 (the non-saturating loss).
    auto loss_g = torch::softplus(-discriminator->forward(fake)).mean();
    opt_g.zero_grad();
    ctx.manual_backward(loss_g);
    opt_g.step();

    ctx.log("loss_d", loss_d.detach(), {.prog_bar = true});
    ctx.log("loss_g", loss_g.detach(), {.prog_bar = true});
  }

  std::vector<volt::OptimizerConfig> configure_optimizers() {
    const auto adam = [](std::vector<torch::Tensor> parameters) {
      return std::make_shared<torch::optim::Adam>(std::move(parameters),
                                                  torch::optim::AdamOptions(2e-4).betas({0.5, 0.999}));
    };
    return {{adam(generator->parameters())}, {adam(discriminator->parameters())}};
  }
};

// After every training epoch (global rank zero): 64 images from the same noise, as an 8 x 8 PNG grid.
struct SampleGrid {
  std::shared_ptr<torch::Tensor> noise = std::make_shared<torch::Tensor>(torch::randn({64, Gan::latent}));
  std::shared_ptr<std::vector<std::filesystem::path>> written = std::make_shared<std::vector<std::filesystem::path>>();

  void on_train_epoch_end(volt::TrainerState& state) {
    if (!state.is_global_zero) return;
    auto* gan = dynamic_cast<Gan*>(state.model);
    if (gan == nullptr) throw std::logic_error("SampleGrid: the model is not a Gan");
    torch::Tensor images;
    {
      torch::NoGradGuard no_grad;
      images = ((gan->generate(noise->to(state.root_device)).to(torch::kFloat) + 1.0) / 2.0).clamp(0.0, 1.0).cpu();
    }
    const auto folder = state.log_dir() / "samples";
    std::filesystem::create_directories(folder);
    const auto path = folder / ("epoch_" + std::to_string(state.current_epoch) + ".png");
    const std::string png = volt::encode_png(volt::make_image_grid(images, {.nrow = 8}));
    std::ofstream file(path, std::ios::binary);
    file.write(png.data(), static_cast<std::streamsize>(png.size()));
    file.close();
    if (!file) throw std::runtime_error("SampleGrid: cannot write " + path.string());
    written->push_back(path);
    std::printf("samples: %s\n", path.string().c_str());
  }
};

int main(int argc, char** argv) {
  volt::cli::Parser parser("fashion_mnist_gan",
                           "Trains a GAN on Fashion-MNIST (manual optimization, two optimizers) and writes a grid of "
                           "generated images after every epoch.");
  parser.defaults().max_epochs = 10;
  parser.defaults().batch_size = 128;
  parser.defaults().seed = 42;
  parser.add_option("--data-dir", "DIR", "folder with the four uncompressed IDX files (default: Debian's package, "
                                         "unpacked once into ~/.cache/volt/fashion-mnist)")
      .add_option("--limit-train-batches", "N", "training batches per epoch (default: all)")
      .add_switch("--no-progress-bar", "print no progress bar");
  // One strategy and two precisions: four Trainers to compile instead of volt::cli's twenty-four.
  using Choices = volt::cli::Choices<volt::cli::default_accelerators, volt::cli::type_list<volt::SingleDevice>,
                                     volt::cli::type_list<volt::FP32, volt::BF16Autocast>>;
  return volt::cli::run<Choices>(parser, argc, argv, [&]<class A, class S, class P>(volt::cli::Args& args) {
    volt::TrainerOptions options = args.trainer_options();
    options.enable_progress_bar = !args.get_switch("--no-progress-bar");
    options.enable_checkpointing = false;
    if (args.is_set("--limit-train-batches")) {
      const std::int64_t limit = args.get_int("--limit-train-batches");
      if (limit < 1) {
        throw volt::cli::UsageError("argument --limit-train-batches: expected a positive integer, got " +
                                    std::to_string(limit));
      }
      options.limit_train_batches = limit;
    }
    auto splits = examples::load_fashion_mnist(args.get("--data-dir"));
    const auto train_batches = examples::batches_per_epoch(splits.train, args.batch_size);
    auto loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
        std::move(splits.train), torch::data::DataLoaderOptions(static_cast<std::size_t>(args.batch_size)));
    SampleGrid samples;
    volt::Trainer<A, S, P> trainer(options, samples);  // holds a copy; the noise and the file list are shared
    *samples.noise = torch::randn({64, Gan::latent});   // after the Trainer seeded: --seed fixes the noise
    auto model = std::make_shared<Gan>();               // and the initial weights
    trainer.fit(model, volt::sized(loader, train_batches));
    if (trainer.interrupted()) return 130;
    const auto metrics = trainer.callback_metrics();
    std::printf("device: %s | precision: %s | epochs: %lld | optimizer steps (generator and discriminator): %lld | "
                "loss_d %.4f | loss_g %.4f | %zu image grid(s) written\n",
                trainer.root_device().str().c_str(), std::string(P::name).c_str(),
                static_cast<long long>(trainer.current_epoch()), static_cast<long long>(trainer.global_step()),
                metrics.count("loss_d") ? metrics.at("loss_d") : 0.0, metrics.count("loss_g") ? metrics.at("loss_g") : 0.0,
                samples.written->size());
    return 0;
  });
}

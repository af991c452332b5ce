// Trains the seeds' SimpleCNN on Fashion-MNIST (28x28x1): two 3x3 convolutions (32 and 64 channels), each
// followed by ReLU and 2x2 max-pooling, a 512-unit layer, dropout 0.25, 10 classes. Validation, early
// stopping, checkpoints and the test accuracy as in the fashion_mnist example; the same flags.
//
//   ./fashion_mnist_cnn --max-epochs 3
//   ./fashion_mnist_cnn --accelerator cuda --precision bf16-mixed
#include <volt/volt.hpp>

#include "../common/fashion_mnist_train.hpp"

struct SimpleCNN : torch::nn::Module {
  torch::nn::Sequential features{
      torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 32, 3).padding(1)), torch::nn::ReLU(), torch::nn::MaxPool2d(2),
      torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 3).padding(1)), torch::nn::ReLU(), torch::nn::MaxPool2d(2)};
  torch::nn::Sequential classifier{torch::nn::Flatten(), torch::nn::Linear(64 * 7 * 7, 512), torch::nn::ReLU(),
                                   torch::nn::Dropout(0.25), torch::nn::Linear(512, 10)};
  SimpleCNN() {
    register_module("features", features);
    register_module("classifier", classifier);
  }
  torch::Tensor forward(const torch::Tensor& images) { return classifier->forward(features->forward(images)); }

  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t, volt::StepContext& ctx) {
    auto loss = torch::nn::functional::cross_entropy(forward(batch.data), batch.target);
    ctx.log("train_loss", loss, {.prog_bar = true});
    return loss;
  }
  void validation_step(const torch::data::Example<>& batch, std::int64_t, volt::StepContext& ctx) {
    auto logits = forward(batch.data);
    ctx.log("val_loss", torch::nn::functional::cross_entropy(logits, batch.target));
    ctx.log("val_acc", logits.argmax(1).eq(batch.target).to(torch::kFloat).mean(), {.prog_bar = true});
  }
  void test_step(const torch::data::Example<>& batch, std::int64_t, volt::StepContext& ctx) {
    ctx.log("test_acc", forward(batch.data).argmax(1).eq(batch.target).to(torch::kFloat).mean());
  }
  volt::OptimizerConfig configure_optimizers() {
    return {std::make_shared<torch::optim::Adam>(parameters(), torch::optim::AdamOptions(1e-3))};
  }
};

int main(int argc, char** argv) {
  volt::cli::Parser parser("fashion_mnist_cnn", "Trains a small CNN on Fashion-MNIST and reports its test accuracy.");
  parser.defaults().max_epochs = 5;
  parser.defaults().batch_size = 128;
  parser.defaults().seed = 42;
  examples::add_fashion_mnist_flags(parser);
  return volt::cli::run(parser, argc, argv, [&]<class A, class S, class P>(volt::cli::Args& args) {
    return examples::fit_and_test<A, S, P>(args, [] { return std::make_shared<SimpleCNN>(); });
  });
}

// Trains the MLP from volt's seeds on Fashion-MNIST with validation, early stopping and checkpoints,
// then reports the test accuracy. Lightning's Trainer flags pick the accelerator, devices, strategy and
// precision at run time (volt::cli); run with --help for the list.
//
//   ./fashion_mnist                                   # auto: MPS, then CUDA, then CPU; 5 epochs
//   ./fashion_mnist --accelerator cuda --precision bf16-mixed
//   ./fashion_mnist --max-steps 20 --limit-val-batches 5 --no-progress-bar
//   ./fashion_mnist --lr-find lr_find.svg             # learning-rate finder first, then train with its suggestion
#include <volt/volt.hpp>

#include "../common/fashion_mnist_train.hpp"

// 784-256-256-10 with batch normalisation, ReLU and dropout 0.2; Adam at `lr` (1e-3, or what --lr-find
// suggests), StepLR(3, 0.5).
struct FashionMLP : torch::nn::Module {
  torch::nn::Sequential net{torch::nn::Flatten(),
                            torch::nn::Linear(784, 256), torch::nn::BatchNorm1d(256), torch::nn::ReLU(), torch::nn::Dropout(0.2),
                            torch::nn::Linear(256, 256), torch::nn::BatchNorm1d(256), torch::nn::ReLU(), torch::nn::Dropout(0.2),
                            torch::nn::Linear(256, 10)};
  FashionMLP() { register_module("net", net); }
  double lr = 1e-3;

  torch::Tensor forward(const torch::Tensor& images) { return net->forward(images); }
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t, volt::StepContext& ctx) {
    auto loss = torch::nn::functional::cross_entropy(net->forward(batch.data), batch.target);
    ctx.log("train_loss", loss, {.prog_bar = true});
    return loss;
  }
  void validation_step(const torch::data::Example<>& batch, std::int64_t, volt::StepContext& ctx) {
    auto logits = net->forward(batch.data);
    ctx.log("val_loss", torch::nn::functional::cross_entropy(logits, batch.target));
    ctx.log("val_acc", logits.argmax(1).eq(batch.target).to(torch::kFloat).mean(), {.prog_bar = true});
  }
  void test_step(const torch::data::Example<>& batch, std::int64_t, volt::StepContext& ctx) {
    ctx.log("test_acc", net->forward(batch.data).argmax(1).eq(batch.target).to(torch::kFloat).mean());
  }
  volt::OptimizerConfig configure_optimizers() {
    auto optimizer = std::make_shared<torch::optim::Adam>(parameters(), torch::optim::AdamOptions(lr));
    return {optimizer, std::make_shared<torch::optim::StepLR>(*optimizer, 3, 0.5)};
  }
};

int main(int argc, char** argv) {
  volt::cli::Parser parser("fashion_mnist", "Trains an MLP on Fashion-MNIST and reports its test accuracy.");
  parser.defaults().max_epochs = 5;
  parser.defaults().batch_size = 128;
  parser.defaults().seed = 42;
  examples::add_fashion_mnist_flags(parser);
  return volt::cli::run(parser, argc, argv, [&]<class A, class S, class P>(volt::cli::Args& args) {
    return examples::fit_and_test<A, S, P>(args, [] { return std::make_shared<FashionMLP>(); });
  });
}

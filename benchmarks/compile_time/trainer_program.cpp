#include <volt/volt.hpp>

#include <cstdio>
#include <vector>

struct MLP : torch::nn::Module {  // no base class to inherit: hooks are found at compile time
  torch::nn::Sequential net{torch::nn::Flatten(), torch::nn::Linear(784, 256), torch::nn::ReLU(),
                            torch::nn::Linear(256, 10)};
  MLP() { register_module("net", net); }

  torch::Tensor training_step(const torch::data::Example<>& batch, int64_t, volt::StepContext& ctx) {
    auto loss = torch::nn::functional::cross_entropy(net->forward(batch.data), batch.target);
    ctx.log("train_loss", loss, {.prog_bar = true});
    return loss;
  }
  void validation_step(const torch::data::Example<>& batch, int64_t, volt::StepContext& ctx) {
    auto logits = net->forward(batch.data);
    ctx.log("val_acc", logits.argmax(1).eq(batch.target).to(torch::kFloat).mean(), {.prog_bar = true});
  }
  auto configure_optimizers() {
    auto optimizer = std::make_shared<torch::optim::Adam>(parameters(), torch::optim::AdamOptions(1e-3));
    return volt::OptimizerConfig{optimizer, std::make_shared<torch::optim::StepLR>(*optimizer, 3, 0.5)};
  }
};

// `count` batches of 64 noise images of 28x28 pixels; in each, row number `label` (0-9) is brighter.
std::vector<torch::data::Example<>> random_batches(int count) {
  std::vector<torch::data::Example<>> batches;
  for (int i = 0; i < count; ++i) {
    auto labels = torch::randint(10, {64});
    auto rows = torch::nn::functional::one_hot(labels, 28).to(torch::kFloat).view({64, 1, 28, 1});
    batches.push_back({torch::randn({64, 1, 28, 28}) + rows, labels});
  }
  return batches;
}

int main() {
  torch::manual_seed(0);
  auto model = std::make_shared<MLP>();
  volt::Trainer<volt::Auto, volt::SingleDevice, volt::BF16Autocast> trainer(
      {.max_epochs = 3}, volt::ModelCheckpoint{{.monitor = "val_acc", .mode = "max"}},
      volt::EarlyStopping{{.monitor = "val_acc", .mode = "max", .patience = 2}});
  trainer.fit(model, random_batches(8), random_batches(2));
  std::printf("val_acc %.3f\n", trainer.validate(model, random_batches(2))["val_acc"]);
}

// expect: volt: You cannot pass `train_dataloader` or `val_dataloaders` to `trainer.fit\(datamodule=...\)`
#include <volt/volt.hpp>

namespace trainer_datamodule_with_data {

struct Model : torch::nn::Module {
  torch::nn::Linear linear{torch::nn::Linear(2, 1)};
  Model() { register_module("linear", linear); }
  torch::Tensor training_step(const torch::data::Example<>& batch) { return linear->forward(batch.data).sum(); }
  void validation_step(const torch::data::Example<>&) {}
  std::shared_ptr<torch::optim::SGD> configure_optimizers() {
    return std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(0.1));
  }
};

struct Data {
  std::vector<torch::data::Example<>> train_dataloader() { return {}; }
};

// A data module and validation data: Lightning refuses both.
void run(volt::Trainer<volt::CPU>& trainer, std::vector<torch::data::Example<>>& val) {
  auto model = std::make_shared<Model>();
  Data data;
#ifdef VOLT_COMPILE_FAIL_CONTROL
  trainer.fit(model, data);
  (void)val;
#else
  trainer.fit(model, data, val);
#endif
}

}  // namespace trainer_datamodule_with_data

// expect: volt: the data module has no dataloader function for this call
#include <volt/volt.hpp>

namespace trainer_datamodule_missing_loader {

struct Model : torch::nn::Module {
  torch::nn::Linear linear{torch::nn::Linear(2, 1)};
  Model() { register_module("linear", linear); }
  torch::Tensor training_step(const torch::data::Example<>& batch) { return linear->forward(batch.data).sum(); }
  std::shared_ptr<torch::optim::SGD> configure_optimizers() {
    return std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(0.1));
  }
};

// A data module with test data only: fit() needs train_dataloader().
struct TestOnly {
#ifdef VOLT_COMPILE_FAIL_CONTROL
  std::vector<torch::data::Example<>> train_dataloader() { return {}; }
#endif
  std::vector<torch::data::Example<>> test_dataloader() { return {}; }
};

void run(volt::Trainer<volt::CPU>& trainer) {
  auto model = std::make_shared<Model>();
  TestOnly data;
  trainer.fit(model, data);
}

}  // namespace trainer_datamodule_missing_loader

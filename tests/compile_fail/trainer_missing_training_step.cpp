// expect: volt: the model has no `training_step` callable with this data's batch type
#include <volt/volt.hpp>

namespace trainer_missing_training_step {

struct NoStep : torch::nn::Module {
#ifdef VOLT_COMPILE_FAIL_CONTROL
  torch::Tensor training_step(const torch::data::Example<>& batch, int64_t) { return batch.data.sum(); }
#endif
  std::shared_ptr<torch::optim::SGD> configure_optimizers() {
    return std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(0.1));
  }
};

void run(volt::Trainer<volt::CPU>& trainer, std::vector<torch::data::Example<>>& data) {
  auto model = std::make_shared<NoStep>();
  trainer.fit(model, data);
}

}  // namespace trainer_missing_training_step

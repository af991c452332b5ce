// expect: volt: the model has no `configure_optimizers\(\)`
#include <volt/volt.hpp>

namespace trainer_missing_configure_optimizers {

struct NoOptimizer : torch::nn::Module {
  torch::Tensor training_step(const torch::data::Example<>& batch, int64_t) { return batch.data.sum(); }
#ifdef VOLT_COMPILE_FAIL_CONTROL
  std::shared_ptr<torch::optim::SGD> configure_optimizers() {
    return std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(0.1));
  }
#endif
};

void run(volt::Trainer<volt::CPU>& trainer, std::vector<torch::data::Example<>>& data) {
  auto model = std::make_shared<NoOptimizer>();
  trainer.fit(model, data);
}

}  // namespace trainer_missing_configure_optimizers

// expect: volt: under manual optimization training_step returns void or a torch::Tensor
#include <volt/volt.hpp>

namespace trainer_manual_step_result {

struct Manual : torch::nn::Module {
  static constexpr bool automatic_optimization = false;
  torch::nn::Linear linear{torch::nn::Linear(2, 1)};
#ifdef VOLT_COMPILE_FAIL_CONTROL
  torch::Tensor training_step(const torch::data::Example<>& batch, int64_t) {
    return linear->forward(batch.data).sum();
  }
#else
  double training_step(const torch::data::Example<>& batch, int64_t) {
    return linear->forward(batch.data).sum().item<double>();
  }
#endif
  std::shared_ptr<torch::optim::SGD> configure_optimizers() {
    return std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(0.1));
  }
};

void run(volt::Trainer<volt::CPU>& trainer, std::vector<torch::data::Example<>>& data) {
  auto model = std::make_shared<Manual>();
  trainer.fit(model, data);
}

}  // namespace trainer_manual_step_result

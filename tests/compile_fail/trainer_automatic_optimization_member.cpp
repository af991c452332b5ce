// expect: volt: `automatic_optimization` must be declared `static constexpr bool automatic_optimization = false;`
#include <volt/volt.hpp>

namespace trainer_automatic_optimization_member {

struct Manual : torch::nn::Module {
#ifdef VOLT_COMPILE_FAIL_CONTROL
  static constexpr bool automatic_optimization = false;
#else
  bool automatic_optimization = false;  // Python's `self.automatic_optimization = False`, as a data member
#endif
  torch::nn::Linear linear{torch::nn::Linear(2, 1)};
  torch::Tensor training_step(const torch::data::Example<>& batch, int64_t, volt::StepContext& ctx) {
    auto& optimizer = ctx.optimizer();
    auto loss = linear->forward(batch.data).sum();
    optimizer.zero_grad();
    ctx.manual_backward(loss);
    optimizer.step();
    return loss;
  }
  std::shared_ptr<torch::optim::SGD> configure_optimizers() {
    return std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(0.1));
  }
};

void run(volt::Trainer<volt::CPU>& trainer, std::vector<torch::data::Example<>>& data) {
  auto model = std::make_shared<Manual>();
  trainer.fit(model, data);
}

}  // namespace trainer_automatic_optimization_member

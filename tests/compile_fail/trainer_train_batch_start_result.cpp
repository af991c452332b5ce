// expect: volt: a model's on_train_batch_start returns void or an integer
#include <volt/volt.hpp>

#include <string>

namespace trainer_train_batch_start_result {

struct Model : torch::nn::Module {
  torch::nn::Linear linear{torch::nn::Linear(2, 1)};
  torch::Tensor training_step(const torch::data::Example<>& batch, int64_t) {
    return linear->forward(batch.data).sum();
  }
#ifdef VOLT_COMPILE_FAIL_CONTROL
  int on_train_batch_start(const torch::data::Example<>&, int64_t batch_idx) { return batch_idx == 3 ? -1 : 0; }
#else
  std::string on_train_batch_start(const torch::data::Example<>&, int64_t) { return "skip"; }
#endif
  std::shared_ptr<torch::optim::SGD> configure_optimizers() {
    return std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(0.1));
  }
};

void run(volt::Trainer<volt::CPU>& trainer, std::vector<torch::data::Example<>>& data) {
  auto model = std::make_shared<Model>();
  trainer.fit(model, data);
}

}  // namespace trainer_train_batch_start_result

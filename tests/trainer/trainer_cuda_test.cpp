#include "test_common.hpp"

#include "trainer/trainer_fixtures.hpp"

#include <cmath>
#include <limits>

using volt_test::cuda_missing;

// The Trainer on CUDA. Without a GPU every case reports that it did not run.
namespace {

/// A regressor whose loss is multiplied by `overflow_factor` on the batches listed in `overflow_batches`:
/// under fp16 that overflows, so the grad scaler must skip those optimizer steps.
struct OverflowingRegressor : volt_test::Regressor {
  std::vector<std::int64_t> overflow_batches;
  std::vector<torch::Tensor> weights_before_batch;
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t batch_idx) {
    weights_before_batch.push_back(linear->weight.detach().clone());
    auto loss = torch::mse_loss(forward(batch.data), batch.target);
    if (std::find(overflow_batches.begin(), overflow_batches.end(), batch_idx) != overflow_batches.end()) {
      loss = loss * 1e30;
    }
    return loss;
  }
  std::shared_ptr<torch::optim::SGD> configure_optimizers() {
    return std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(0.01));
  }
};

}  // namespace

TEST_CASE("CUDA: Trainer<CUDA> matches a hand-written loop on the GPU within float tolerance") {
  if (cuda_missing()) return;
  constexpr int steps = 60;
  auto data = volt_test::make_classification_batches(10, 16);
  torch::manual_seed(7);
  auto hand = std::make_shared<volt_test::PlainClassifier>();
  torch::manual_seed(7);
  auto model = std::make_shared<volt_test::PlainClassifier>();
  const torch::Device cuda(torch::kCUDA, 0);
  {
    hand->to(cuda);
    torch::optim::Adam optimizer(hand->parameters(), torch::optim::AdamOptions(1e-2));
    int step = 0;
    while (step < steps) {
      for (auto& batch : data) {
        if (step == steps) break;
        optimizer.zero_grad();
        auto loss = torch::nn::functional::cross_entropy(hand->forward(batch.data.to(cuda)), batch.target.to(cuda));
        loss.backward();
        optimizer.step();
        ++step;
      }
    }
  }
  volt_test::TempDir dir;
  auto options = volt_test::quiet_options(dir);
  options.max_steps = steps;
  options.max_epochs = -1;
  volt::Trainer<volt::CUDA> trainer(options);
  CHECK((trainer.root_device() == cuda));
  trainer.fit(model, data);
  CHECK(trainer.global_step() == steps);
  for (std::size_t i = 0; i < hand->parameters().size(); ++i) {
    CHECK(model->parameters()[i].device().is_cuda());
    CHECK(torch::allclose(hand->parameters()[i], model->parameters()[i], 1e-4, 1e-5));
  }
}

TEST_CASE("CUDA: under FP16Autocast an overflowing step is skipped, halves the scale, and still counts") {
  if (cuda_missing()) return;
  volt_test::TempDir dir;
  auto model = std::make_shared<OverflowingRegressor>();
  model->overflow_batches = {1, 3};
  auto options = volt_test::quiet_options(dir);
  options.max_epochs = 1;
  // A small initial scale, so that only the planted overflows overflow fp16.
  const double initial_scale = 1024.0;
  volt::Trainer<volt::CUDA, volt::SingleDevice, volt::FP16Autocast> trainer(
      options, volt::FP16Autocast(volt::GradScalerOptions{.init_scale = initial_scale}));
  REQUIRE(trainer.precision().scaler() != nullptr);
  trainer.fit(model, volt_test::make_batches(5));
  // Lightning: skipped AMP steps still increment global_step.
  CHECK(trainer.global_step() == 5);
  // Weights before batch i+1 equal those before batch i exactly when step i was skipped.
  REQUIRE(model->weights_before_batch.size() == 5);
  CHECK(torch::equal(model->weights_before_batch[1], model->weights_before_batch[2]));   // batch 1 skipped
  CHECK(torch::equal(model->weights_before_batch[3], model->weights_before_batch[4]));   // batch 3 skipped
  CHECK(!torch::equal(model->weights_before_batch[0], model->weights_before_batch[1]));  // batch 0 stepped
  CHECK(!torch::equal(model->weights_before_batch[2], model->weights_before_batch[3]));  // batch 2 stepped
  CHECK(trainer.precision().scaler()->get_scale() == doctest::Approx(initial_scale / 4));
}

TEST_CASE("CUDA: BF16Autocast steps run under autocast on the GPU and checkpoints load on the CPU") {
  if (cuda_missing()) return;
  volt_test::TempDir dir;
  struct DtypeProbe : volt_test::Regressor {
    c10::ScalarType seen = c10::ScalarType::Undefined;
    torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t) {
      auto out = forward(batch.data);
      seen = out.scalar_type();
      return torch::mse_loss(out.to(torch::kFloat), batch.target);
    }
  };
  auto model = std::make_shared<DtypeProbe>();
  auto options = volt_test::quiet_options(dir);
  options.max_epochs = 1;
  volt::Trainer<volt::CUDA, volt::SingleDevice, volt::BF16Autocast> trainer(options);
  trainer.fit(model, volt_test::make_batches(2));
  CHECK((model->seen == torch::kBFloat16));
  CHECK((model->linear->weight.scalar_type() == torch::kFloat));
  const auto path = dir.path / "cuda.ckpt";
  trainer.save_checkpoint(path);
  // The checkpoint written from CUDA resumes on the CPU (tensors mapped to the CPU).
  auto cpu_model = std::make_shared<DtypeProbe>();
  auto cpu_options = volt_test::quiet_options(dir);
  cpu_options.max_epochs = 2;
  volt::Trainer<volt::CPU> cpu_trainer(cpu_options);
  cpu_trainer.fit(cpu_model, volt_test::make_batches(2), path);
  CHECK(cpu_trainer.global_step() == 4);
  CHECK(cpu_model->linear->weight.device().is_cpu());
}

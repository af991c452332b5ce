#include "test_common.hpp"

#include "trainer/trainer_fixtures.hpp"

using volt_test::cuda_missing;

// Trainer<CUDA, SingleDevice, FP32> against a hand-written LibTorch loop on the GPU: same seed, model, data
// and order of operations, 100 optimizer steps; the weights must agree within float tolerance (GPU kernels
// may reduce in a different order than the CPU, and cuBLAS may pick different algorithms run to run).
// The CPU version of this test (trainer_test.cpp) is bit-identical. Both sides step Adam parameter by
// parameter (volt::optim::Implementation::per_parameter), so the op order is the same; with the default
// (fused Adam on CUDA) only the rounding would differ. Without a GPU it reports a skip.
namespace {

/// Relative tolerance for 100 Adam steps in float32 with lr 1e-2 (a few ulps of drift per step).
constexpr double weight_rtol = 1e-4;
constexpr double weight_atol = 1e-5;

}  // namespace

TEST_CASE("CUDA parity: Trainer<CUDA, SingleDevice, FP32> and a hand-written loop agree after 100 steps") {
  if (cuda_missing()) return;
  volt::optim::ScopedDefaultImplementation same_order(volt::optim::Implementation::per_parameter);
  constexpr int steps = 100;
  const torch::Device cuda(torch::kCUDA, 0);
  auto data = volt_test::make_classification_batches(20, 16);
  torch::manual_seed(7);
  auto hand = std::make_shared<volt_test::PlainClassifier>();
  torch::manual_seed(7);
  auto model = std::make_shared<volt_test::PlainClassifier>();
  for (std::size_t i = 0; i < hand->parameters().size(); ++i) {
    REQUIRE(torch::equal(hand->parameters()[i], model->parameters()[i]));
  }
  {
    // The Trainer's order: model to the device before the optimizer is built (configure_optimizers runs
    // after the move), train mode, then per batch: move, forward, loss, zero_grad, backward, step.
    hand->to(cuda);
    hand->train();
    torch::optim::Adam optimizer(hand->parameters(), torch::optim::AdamOptions(1e-2));
    torch::manual_seed(11);
    int step = 0;
    while (step < steps) {
      for (auto& batch : data) {
        if (step == steps) break;
        auto on_device = volt::batch_to_device(batch, cuda);
        auto loss = torch::nn::functional::cross_entropy(hand->forward(on_device.data), on_device.target);
        optimizer.zero_grad();
        loss.backward();
        optimizer.step();
        ++step;
      }
    }
    torch::cuda::synchronize();
  }
  volt_test::TempDir dir;
  auto options = volt_test::quiet_options(dir);
  options.max_steps = steps;
  options.max_epochs = -1;
  volt::Trainer<volt::CUDA, volt::SingleDevice, volt::FP32> trainer(options);
  REQUIRE((trainer.root_device() == cuda));
  torch::manual_seed(11);
  trainer.fit(model, data);
  CHECK(trainer.global_step() == steps);
  double max_difference = 0;
  for (std::size_t i = 0; i < hand->parameters().size(); ++i) {
    const torch::Tensor expected = hand->parameters()[i];
    const torch::Tensor actual = model->parameters()[i];
    CHECK(actual.device().is_cuda());
    CHECK(torch::allclose(expected, actual, weight_rtol, weight_atol));
    max_difference = std::max(max_difference, (expected - actual).abs().max().item<double>());
  }
  MESSAGE("largest weight difference after " << steps << " steps on CUDA: " << max_difference);
  // The run really trained: the weights moved away from the shared initialisation.
  torch::manual_seed(7);
  auto initial = std::make_shared<volt_test::PlainClassifier>();
  CHECK_FALSE(torch::allclose(initial->parameters()[0], model->parameters()[0].cpu()));
}

TEST_CASE("CUDA parity: with shuffled data drawn from the same generator, the runs still agree") {
  if (cuda_missing()) return;
  volt::optim::ScopedDefaultImplementation same_order(volt::optim::Implementation::per_parameter);
  constexpr int steps = 100;
  const torch::Device cuda(torch::kCUDA, 0);
  auto data = volt_test::make_classification_batches(20, 16);
  torch::manual_seed(7);
  auto hand = std::make_shared<volt_test::PlainClassifier>();
  torch::manual_seed(7);
  auto model = std::make_shared<volt_test::PlainClassifier>();
  volt_test::ShuffledData shuffled{&data};
  {
    hand->to(cuda);
    hand->train();
    torch::optim::Adam optimizer(hand->parameters(), torch::optim::AdamOptions(1e-2));
    torch::manual_seed(11);
    int step = 0;
    while (step < steps) {
      for (auto it = shuffled.begin(); it != shuffled.end() && step < steps; ++it) {
        auto on_device = volt::batch_to_device(*it, cuda);
        auto loss = torch::nn::functional::cross_entropy(hand->forward(on_device.data), on_device.target);
        optimizer.zero_grad();
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
  torch::manual_seed(11);
  trainer.fit(model, shuffled);
  CHECK(trainer.global_step() == steps);
  for (std::size_t i = 0; i < hand->parameters().size(); ++i) {
    CHECK(torch::allclose(hand->parameters()[i], model->parameters()[i], weight_rtol, weight_atol));
  }
}

#include "test_common.hpp"

#include "trainer/trainer_fixtures.hpp"

#include <algorithm>
#include <memory>
#include <vector>

using volt_test::copy_parameters;

using volt_test::cuda_missing;

// Manual optimization on CUDA under FP16Autocast: the grad scaler scales manual_backward, skips the steps
// whose gradients overflow (step() returns false, global_step still counts them), and clip_gradients clips
// unscaled gradients. Without a GPU every case reports that it did not run.
namespace {

struct AutoOverflow : torch::nn::Module {
  torch::nn::Linear linear{torch::nn::Linear(2, 1)};
  std::vector<std::int64_t> overflow_batches;
  AutoOverflow() { register_module("linear", linear); }
  torch::Tensor loss_of(const torch::data::Example<>& batch, std::int64_t batch_idx) {
    auto loss = torch::mse_loss(linear->forward(batch.data), batch.target);
    if (std::find(overflow_batches.begin(), overflow_batches.end(), batch_idx) != overflow_batches.end()) {
      loss = loss * 1e30;
    }
    return loss;
  }
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t batch_idx) {
    return loss_of(batch, batch_idx);
  }
  std::shared_ptr<torch::optim::SGD> configure_optimizers() {
    return std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  }
};

struct ManualOverflow : AutoOverflow {
  static constexpr bool automatic_optimization = false;
  double clip = 0.0;
  std::vector<bool> stepped;
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t batch_idx, volt::StepContext& ctx) {
    auto& optimizer = ctx.optimizer();
    auto loss = loss_of(batch, batch_idx);
    optimizer.zero_grad();
    ctx.manual_backward(loss);
    ctx.clip_gradients(optimizer, clip, volt::GradClipAlgorithm::norm);
    stepped.push_back(optimizer.step());
    return loss;
  }
};

}  // namespace

TEST_CASE("CUDA: manual optimization under FP16Autocast: the scaler skips overflowing steps, as automatic does") {
  if (cuda_missing()) return;
  for (const double clip : {0.0, 0.05}) {
    CAPTURE(clip);
    volt_test::TempDir dir;
    auto options = volt_test::quiet_options(dir);
    options.max_epochs = 2;
    auto automatic = std::make_shared<AutoOverflow>();
    auto manual = std::make_shared<ManualOverflow>();
    copy_parameters(*automatic, *manual);
    automatic->overflow_batches = manual->overflow_batches = {1, 4};
    manual->clip = clip;
    auto auto_options = options;
    if (clip > 0) auto_options.gradient_clip_val = clip;
    // A small initial scale: only the two batches whose loss is multiplied by 1e30 overflow (at the default
    // 65536 the first steps' float16 gradients overflow too, until the scale has come down).
    volt::Trainer<volt::CUDA, volt::SingleDevice, volt::FP16Autocast> auto_trainer(
        auto_options, volt::FP16Autocast({.init_scale = 256}));
    auto_trainer.fit(automatic, volt_test::make_batches(6));
    volt::Trainer<volt::CUDA, volt::SingleDevice, volt::FP16Autocast> manual_trainer(
        options, volt::FP16Autocast({.init_scale = 256}));
    manual_trainer.fit(manual, volt_test::make_batches(6));
    CHECK(manual_trainer.global_step() == 12);
    CHECK(auto_trainer.global_step() == 12);
    REQUIRE(manual->stepped.size() == 12);
    for (std::size_t i = 0; i < 12; ++i) CHECK(manual->stepped[i] == !(i % 6 == 1 || i % 6 == 4));
    const auto a = automatic->named_parameters();
    for (const auto& item : manual->named_parameters()) CHECK_MESSAGE(torch::equal(item.value(), a[item.key()]), item.key());
  }
}

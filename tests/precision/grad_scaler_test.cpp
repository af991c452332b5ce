#include "test_common.hpp"

#include <cmath>
#include <limits>
#include <sstream>
#include <vector>

namespace {

volt::GradScalerOptions plain_path(volt::GradScalerOptions options = {}) {
  options.use_fused_kernels = false;
  return options;
}

/// One parameter per gradient, each with its gradient set: what backward would leave behind.
struct Parameters {
  std::vector<torch::Tensor> tensors;
  std::unique_ptr<torch::optim::SGD> optimizer;

  explicit Parameters(const std::vector<torch::Tensor>& gradients, double learning_rate = 0.1) {
    for (const auto& gradient : gradients) {
      auto parameter = torch::ones_like(gradient).requires_grad_();
      parameter.mutable_grad() = gradient.clone();
      tensors.push_back(parameter);
    }
    optimizer = std::make_unique<torch::optim::SGD>(tensors, torch::optim::SGDOptions(learning_rate));
  }
  void set_gradients(const std::vector<torch::Tensor>& gradients) {
    for (std::size_t i = 0; i < tensors.size(); ++i) tensors[i].mutable_grad() = gradients[i].clone();
  }
};

constexpr float inf = std::numeric_limits<float>::infinity();

}  // namespace

TEST_CASE("GradScaler defaults are PyTorch's and scale() multiplies by the scale") {
  volt::GradScaler scaler;
  CHECK(scaler.is_enabled());
  CHECK(scaler.get_scale() == 65536.0);
  CHECK(scaler.growth_factor() == 2.0);
  CHECK(scaler.backoff_factor() == 0.5);
  CHECK(scaler.growth_interval() == 2000);
  CHECK_FALSE(scaler.scale_tensor().defined());
  const auto scaled = scaler.scale(torch::tensor(0.5F));
  CHECK(scaled.item<float>() == 32768.0F);
  CHECK(scaler.scale_tensor().dim() == 0);
  CHECK((scaler.scale_tensor().scalar_type() == torch::kFloat));
}

TEST_CASE("GradScaler rejects factors that would not grow or not back off") {
  CHECK_THROWS_WITH_AS(volt::GradScaler({.growth_factor = 1.0}), "The growth factor must be > 1.0.",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(volt::GradScaler({.backoff_factor = 1.0}), "The backoff factor must be < 1.0.",
                       std::invalid_argument);
  VOLT_CHECK_THROWS_CONTAINS(volt::GradScaler({.growth_interval = 0}), std::invalid_argument, "growth_interval");
  CHECK_NOTHROW(volt::GradScaler({.growth_factor = 0.5, .enabled = false}));
}

TEST_CASE("a disabled GradScaler passes the loss through and always steps") {
  volt::GradScaler scaler({.enabled = false});
  const auto loss = torch::tensor(2.0F);
  CHECK(scaler.scale(loss).is_same(loss));
  CHECK(scaler.get_scale() == 1.0);
  Parameters parameters({torch::tensor({inf})});
  scaler.unscale_(*parameters.optimizer);
  CHECK(scaler.step(*parameters.optimizer));
  scaler.update();
  CHECK_FALSE(scaler.state_dict().has_value());
}

TEST_CASE("plain path: finite gradients are unscaled, the step runs, the scale grows after the interval") {
  volt::GradScaler scaler(plain_path({.init_scale = 8.0, .growth_interval = 3}));
  Parameters parameters({torch::tensor({8.0F, -16.0F})}, /*learning_rate=*/1.0);
  scaler.scale(torch::tensor(1.0F));
  for (int step = 1; step <= 3; ++step) {
    CAPTURE(step);
    parameters.set_gradients({torch::tensor({8.0F, -16.0F}) * scaler.get_scale() / 8.0});
    const auto before = parameters.tensors[0].clone();
    scaler.unscale_(*parameters.optimizer);
    CHECK(torch::equal(parameters.tensors[0].grad(), torch::tensor({1.0F, -2.0F})));
    CHECK((scaler.stage(*parameters.optimizer) == volt::GradScaler::Stage::unscaled));
    CHECK(scaler.step(*parameters.optimizer));
    CHECK(torch::equal(parameters.tensors[0], before - torch::tensor({1.0F, -2.0F})));
    scaler.update();
    CHECK((scaler.stage(*parameters.optimizer) == volt::GradScaler::Stage::ready));
    if (step < 3) {
      CHECK(scaler.get_scale() == 8.0);
      CHECK(scaler.growth_tracker() == step);
    }
  }
  CHECK(scaler.get_scale() == 16.0);
  CHECK(scaler.growth_tracker() == 0);
}

TEST_CASE("plain path: an inf or NaN gradient skips the step, halves the scale and resets the tracker") {
  for (const float bad : {inf, -inf, std::numeric_limits<float>::quiet_NaN()}) {
    CAPTURE(bad);
    volt::GradScaler scaler(plain_path({.growth_interval = 5}));
    Parameters parameters({torch::tensor({1.0F, 2.0F}), torch::tensor({3.0F, bad})});
    scaler.scale(torch::tensor(1.0F));
    // A finite iteration first, so the tracker has something to reset.
    const auto good = std::vector<torch::Tensor>{torch::tensor({1.0F, 2.0F}), torch::tensor({3.0F, 4.0F})};
    parameters.set_gradients(good);
    CHECK(scaler.step(*parameters.optimizer));
    scaler.update();
    CHECK(scaler.growth_tracker() == 1);

    parameters.set_gradients({torch::tensor({1.0F, 2.0F}), torch::tensor({3.0F, bad})});
    const auto first = parameters.tensors[0].clone();
    const auto second = parameters.tensors[1].clone();
    CHECK_FALSE(scaler.step(*parameters.optimizer));
    CHECK(torch::equal(parameters.tensors[0], first));
    CHECK(torch::equal(parameters.tensors[1], second));
    scaler.update();
    CHECK(scaler.get_scale() == 32768.0);
    CHECK(scaler.growth_tracker() == 0);
    parameters.set_gradients({torch::tensor({1.0F, 2.0F}), torch::tensor({3.0F, bad})});
    CHECK_FALSE(scaler.step(*parameters.optimizer));
    scaler.update();
    CHECK(scaler.get_scale() == 16384.0);
  }
}

TEST_CASE("the scale does not grow past the largest finite float") {
  volt::GradScaler scaler(plain_path({.init_scale = 3e38, .growth_interval = 1}));
  Parameters parameters({torch::tensor({1.0F})});
  scaler.scale(torch::tensor(1.0F));
  CHECK(scaler.step(*parameters.optimizer));
  scaler.update();
  CHECK(scaler.get_scale() == static_cast<double>(3e38F));
  CHECK(scaler.growth_tracker() == 0);
}

TEST_CASE("unscale_ and step may run once per optimizer per iteration") {
  volt::GradScaler scaler;
  Parameters parameters({torch::tensor({1.0F})});
  CHECK_THROWS_WITH_AS(scaler.unscale_(*parameters.optimizer), doctest::Contains("Attempted unscale_ but _scale is None"),
                       std::runtime_error);
  CHECK_THROWS_AS(scaler.update(), std::runtime_error);
  scaler.scale(torch::tensor(1.0F));
  scaler.unscale_(*parameters.optimizer);
  CHECK_THROWS_WITH_AS(scaler.unscale_(*parameters.optimizer),
                       "unscale_() has already been called on this optimizer since the last update().",
                       std::runtime_error);
  CHECK(scaler.step(*parameters.optimizer));
  CHECK_THROWS_WITH_AS(scaler.unscale_(*parameters.optimizer), "unscale_() is being called after step().",
                       std::runtime_error);
  CHECK_THROWS_WITH_AS(scaler.step(*parameters.optimizer), "step() has already been called since the last update().",
                       std::runtime_error);
  scaler.update();
  CHECK_NOTHROW(scaler.unscale_(*parameters.optimizer));
}

TEST_CASE("GradScaler errors for missing gradients, fp16 gradients and an update with nothing recorded") {
  volt::GradScaler scaler;
  scaler.scale(torch::tensor(1.0F));
  CHECK_THROWS_WITH_AS(scaler.update(), "No inf checks were recorded prior to update.", std::runtime_error);
  auto parameter = torch::ones({2}, torch::requires_grad());
  torch::optim::SGD without_gradients({parameter}, torch::optim::SGDOptions(0.1));
  VOLT_CHECK_THROWS_CONTAINS(scaler.step(without_gradients), std::runtime_error,
                             "No inf checks were recorded for this optimizer.");
  Parameters half({torch::ones({2}, torch::kHalf)});
  CHECK_THROWS_WITH_AS(scaler.unscale_(*half.optimizer), "Attempting to unscale FP16 gradients.",
                       std::invalid_argument);
}

TEST_CASE("optimizers are tracked separately; one overflow skips only its step and backs off once") {
  volt::GradScaler scaler(plain_path());
  Parameters finite({torch::tensor({65536.0F})}, 1.0);
  Parameters overflowing({torch::tensor({inf})}, 1.0);
  scaler.scale(torch::tensor(1.0F));
  scaler.unscale_(*finite.optimizer);
  CHECK((scaler.stage(*finite.optimizer) == volt::GradScaler::Stage::unscaled));
  CHECK((scaler.stage(*overflowing.optimizer) == volt::GradScaler::Stage::ready));
  CHECK(scaler.step(*finite.optimizer));
  CHECK(finite.tensors[0].item<float>() == 0.0F);
  CHECK_FALSE(scaler.step(*overflowing.optimizer));
  CHECK(overflowing.tensors[0].item<float>() == 1.0F);
  scaler.update();
  CHECK(scaler.get_scale() == 32768.0);
}

TEST_CASE("gradients of different dtypes are grouped and each unscaled in its dtype") {
  for (const bool fused : {false, true}) {
    CAPTURE(fused);
    volt::GradScaler scaler({.init_scale = 4.0, .use_fused_kernels = fused});
    Parameters parameters({torch::tensor({4.0F, 8.0F}), torch::tensor({12.0}, torch::kDouble),
                           torch::tensor({-4.0F}, torch::kBFloat16), torch::tensor({16.0F})});
    scaler.scale(torch::tensor(1.0F));
    scaler.unscale_(*parameters.optimizer);
    CHECK(torch::equal(parameters.tensors[0].grad(), torch::tensor({1.0F, 2.0F})));
    CHECK(torch::equal(parameters.tensors[1].grad(), torch::tensor({3.0}, torch::kDouble)));
    CHECK(torch::equal(parameters.tensors[2].grad(), torch::tensor({-1.0F}, torch::kBFloat16)));
    CHECK(torch::equal(parameters.tensors[3].grad(), torch::tensor({4.0F})));
    CHECK((parameters.tensors[1].grad().scalar_type() == torch::kDouble));
    CHECK((parameters.tensors[2].grad().scalar_type() == torch::kBFloat16));
  }
}

TEST_CASE("GradScaler state round trip: state_dict and archives") {
  volt::GradScaler scaler(plain_path({.init_scale = 1024.0, .growth_factor = 4.0, .backoff_factor = 0.25,
                                      .growth_interval = 7}));
  Parameters parameters({torch::tensor({1.0F})});
  scaler.scale(torch::tensor(1.0F));
  for (int step = 0; step < 3; ++step) {
    parameters.set_gradients({torch::tensor({1.0F})});
    scaler.step(*parameters.optimizer);
    scaler.update();
  }
  const auto state = scaler.state_dict();
  REQUIRE(state.has_value());
  CHECK(state->scale == 1024.0);
  CHECK(state->growth_factor == 4.0);
  CHECK(state->backoff_factor == 0.25);
  CHECK(state->growth_interval == 7);
  CHECK(state->growth_tracker == 3);

  SUBCASE("state_dict, before and after the scale exists") {
    volt::GradScaler fresh;
    fresh.load_state_dict(*state);
    CHECK(fresh.get_scale() == 1024.0);
    CHECK(fresh.growth_tracker() == 3);
    fresh.scale(torch::tensor(1.0F));
    CHECK(fresh.get_scale() == 1024.0);
    CHECK(fresh.growth_tracker() == 3);
    fresh.load_state_dict({.scale = 2.0, .growth_tracker = 1});
    CHECK(fresh.get_scale() == 2.0);
    CHECK(fresh.growth_tracker() == 1);
  }
  SUBCASE("archives, through a serialized stream") {
    torch::serialize::OutputArchive output;
    scaler.save(output);
    std::stringstream stream;
    output.save_to(stream);
    torch::serialize::InputArchive input;
    input.load_from(stream);
    volt::GradScaler restored;
    restored.scale(torch::tensor(1.0F));
    restored.load(input);
    CHECK(restored.state_dict()->scale == 1024.0);
    CHECK(restored.growth_factor() == 4.0);
    CHECK(restored.backoff_factor() == 0.25);
    CHECK(restored.growth_interval() == 7);
    CHECK(restored.growth_tracker() == 3);
  }
  SUBCASE("an archive without scaler state") {
    torch::serialize::OutputArchive output;
    volt::GradScaler({.enabled = false}).save(output);
    output.write("something_else", c10::IValue(1.0));
    std::stringstream stream;
    output.save_to(stream);
    torch::serialize::InputArchive input;
    input.load_from(stream);
    volt::GradScaler enabled;
    CHECK_THROWS_WITH_AS(enabled.load(input),
                         "The source state dict is empty, possibly because it was saved from a disabled instance "
                         "of GradScaler.",
                         std::runtime_error);
    volt::GradScaler disabled({.enabled = false});
    CHECK_NOTHROW(disabled.load(input));
  }
}

namespace {

/// Runs the same iterations through a fused and a plain scaler and checks every gradient, step decision,
/// scale and tracker agree exactly.
void check_fused_equals_plain(torch::Device device) {
  torch::manual_seed(1);
  const auto options = torch::TensorOptions().device(device);
  volt::GradScaler fused({.init_scale = 1024.0, .growth_interval = 2, .use_fused_kernels = true}, device);
  volt::GradScaler plain({.init_scale = 1024.0, .growth_interval = 2, .use_fused_kernels = false}, device);
  const std::vector<std::vector<torch::Tensor>> iterations = {
      {torch::randn({5, 3}, options) * 1000, torch::randn({7}, options.dtype(torch::kBFloat16)) * 1000},
      {torch::randn({5, 3}, options) * 3, torch::randn({7}, options.dtype(torch::kBFloat16))},
      {torch::randn({5, 3}, options), torch::randn({7}, options.dtype(torch::kBFloat16))},
      {torch::full({5, 3}, inf, options), torch::randn({7}, options.dtype(torch::kBFloat16))},
      {torch::randn({5, 3}, options), torch::full({7}, std::nanf(""), options.dtype(torch::kBFloat16))},
      {torch::randn({5, 3}, options) * 1e-3, torch::randn({7}, options.dtype(torch::kBFloat16)) * 1e-3},
  };
  Parameters fused_parameters(iterations[0]);
  Parameters plain_parameters(iterations[0]);
  for (std::size_t iteration = 0; iteration < iterations.size(); ++iteration) {
    CAPTURE(iteration);
    fused_parameters.set_gradients(iterations[iteration]);
    plain_parameters.set_gradients(iterations[iteration]);
    fused.unscale_(*fused_parameters.optimizer);
    plain.unscale_(*plain_parameters.optimizer);
    for (std::size_t i = 0; i < iterations[iteration].size(); ++i) {
      CHECK(torch::allclose(fused_parameters.tensors[i].grad(), plain_parameters.tensors[i].grad(), 0.0, 0.0,
                            /*equal_nan=*/true));
    }
    CHECK(fused.step(*fused_parameters.optimizer) == plain.step(*plain_parameters.optimizer));
    for (std::size_t i = 0; i < iterations[iteration].size(); ++i) {
      CHECK(torch::equal(fused_parameters.tensors[i], plain_parameters.tensors[i]));
    }
    fused.update();
    plain.update();
    CHECK(fused.get_scale() == plain.get_scale());
    CHECK(fused.growth_tracker() == plain.growth_tracker());
  }
  // Two backoffs and one growth happened: 1024 * 2 / 2 / 2.
  CHECK(plain.get_scale() == 512.0);
}

}  // namespace

TEST_CASE("fused kernels give the plain path's results on CPU (where this LibTorch has CPU kernels)") {
  if (!volt::compat::amp_scaler_kernels_available(torch::kCPU)) {
    MESSAGE("skipped: this LibTorch (" TORCH_VERSION ") has no CPU kernels for the fused grad-scaler ops");
    volt::GradScaler scaler({.use_fused_kernels = true}, torch::kCPU);
    Parameters parameters({torch::tensor({65536.0F})});
    scaler.unscale_(*parameters.optimizer);  // falls back to the plain path instead of throwing
    CHECK(parameters.tensors[0].grad().item<float>() == 1.0F);
    return;
  }
  check_fused_equals_plain(torch::kCPU);
}

TEST_CASE("GPU: fused kernels give the plain path's results on CUDA") {
  if (!cuda_here("fused scaler path equals the plain path on CUDA")) return;
  REQUIRE(volt::compat::amp_scaler_kernels_available(torch::kCUDA));
  check_fused_equals_plain(torch::kCUDA);
}

TEST_CASE("GPU: gradients on CPU and CUDA in one optimizer are unscaled on their own devices") {
  if (!cuda_here("gradients on two devices")) return;
  volt::GradScaler scaler({.init_scale = 4.0}, torch::kCUDA);
  Parameters parameters({torch::tensor({8.0F}).to(torch::kCUDA), torch::tensor({inf})});
  scaler.unscale_(*parameters.optimizer);
  CHECK(parameters.tensors[0].grad().item<float>() == 2.0F);
  CHECK_FALSE(scaler.step(*parameters.optimizer));
  scaler.update();
  CHECK(scaler.get_scale() == 2.0);
  CHECK(scaler.scale_tensor().is_cuda());
}

#ifdef VOLT_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>

using volt_test::cuda_here;

TEST_CASE("GPU: scale, unscale_ and update do not wait for the GPU; step reads the found-inf flag") {
  if (!cuda_here("no host synchronisation in unscale_ and update")) return;
  /// Makes every synchronising CUDA call throw while alive.
  struct ThrowOnSynchronisation {
    c10::cuda::SyncDebugMode previous = c10::cuda::warning_state().get_sync_debug_mode();
    ThrowOnSynchronisation() { c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_ERROR); }
    ~ThrowOnSynchronisation() { c10::cuda::warning_state().set_sync_debug_mode(previous); }
  };
  for (const bool fused : {true, false}) {
    CAPTURE(fused);
    volt::GradScaler scaler({.growth_interval = 1, .use_fused_kernels = fused}, torch::kCUDA);
    const auto options = torch::TensorOptions().device(torch::kCUDA);
    Parameters parameters({torch::randn({4, 4}, options), torch::randn({3}, options.dtype(torch::kBFloat16))});
    const auto loss = torch::ones({}, options);
    {
      ThrowOnSynchronisation no_sync;
      CHECK_NOTHROW(scaler.scale(loss));
      CHECK_NOTHROW(scaler.unscale_(*parameters.optimizer));
    }
    {
      ThrowOnSynchronisation no_sync;
      CHECK_THROWS(scaler.step(*parameters.optimizer));
    }
    CHECK(scaler.step(*parameters.optimizer));
    {
      ThrowOnSynchronisation no_sync;
      CHECK_NOTHROW(scaler.update());
    }
    CHECK(scaler.get_scale() == 131072.0);
  }
}
#endif

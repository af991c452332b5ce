// volt::optim::CapturableStep (the optimizer step inside a captured CUDA graph) against LibTorch's own
// optimizer.step(), and the sync-free gradient clipping against torch::nn::utils. On the CPU: the fused
// kernels with a tensor learning rate exist there too from LibTorch 2.4, so the arithmetic, the device-side
// step counts, the learning-rate refresh and the found-inf skip are all checked without a GPU.
#include "test_common.hpp"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

namespace {

std::vector<torch::Tensor> capturable_parameters(std::uint64_t seed) {
  torch::manual_seed(seed);
  std::vector<torch::Tensor> parameters;
  for (const auto& shape : std::vector<std::vector<std::int64_t>>{{6, 4}, {4}, {2, 3, 3}, {1}}) {
    parameters.push_back(torch::randn(shape).requires_grad_());
  }
  return parameters;
}

std::vector<torch::Tensor> copies_of(const std::vector<torch::Tensor>& parameters) {
  std::vector<torch::Tensor> copies;
  for (const auto& parameter : parameters) copies.push_back(parameter.detach().clone().requires_grad_());
  return copies;
}

void give_gradients(std::vector<torch::Tensor>& parameters, int step) {
  torch::manual_seed(500 + static_cast<std::uint64_t>(step));
  for (auto& parameter : parameters) parameter.mutable_grad() = torch::randn(parameter.sizes()) * 3.0;
}

double largest_difference(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  double largest = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    largest = std::max(largest, (a[i].detach() - b[i].detach()).abs().max().item<double>());
  }
  return largest;
}

double total_norm(const std::vector<torch::Tensor>& tensors) {
  double sum = 0;
  for (const auto& tensor : tensors) sum += tensor.pow(2).sum().item<double>();
  return std::sqrt(sum);
}

// Runs `steps` steps of two copies of one optimizer: the reference with optimizer.step() throughout, the
// other with optimizer.step() for the first step and CapturableStep after; the learning rate of group 0
// changes at step 3 (as a scheduler would) on both.
template <class Optimizer, class Options>
void compare_with_libtorch(const Options& options, int steps, double tolerance) {
  auto reference_parameters = capturable_parameters(7);
  auto parameters = copies_of(reference_parameters);
  Optimizer reference(reference_parameters, options);
  Optimizer optimizer(parameters, options);
  std::unique_ptr<volt::optim::CapturableStep> capturable;
  for (int step = 0; step < steps; ++step) {
    give_gradients(reference_parameters, step);
    give_gradients(parameters, step);
    if (step == 3) {
      reference.param_groups()[0].options().set_lr(options.lr() * 0.25);
      optimizer.param_groups()[0].options().set_lr(options.lr() * 0.25);
    }
    reference.step();
    if (step == 0) {
      optimizer.step();
      capturable = std::make_unique<volt::optim::CapturableStep>(optimizer);
    } else {
      capturable->refresh_learning_rates();
      capturable->step();
    }
  }
  const double difference = largest_difference(parameters, reference_parameters);
  INFO("largest parameter difference " << difference);
  CHECK(difference <= tolerance);
  // The state is LibTorch's again after write_back: saving and stepping on the host continue alike.
  capturable->write_back();
  give_gradients(reference_parameters, steps);
  give_gradients(parameters, steps);
  reference.step();
  optimizer.step();
  CHECK(largest_difference(parameters, reference_parameters) <= tolerance);
}

}  // namespace

TEST_CASE("CapturableStep: obstacles name the optimizer type or the LibTorch version") {
  auto parameters = capturable_parameters(1);
  torch::optim::RMSprop rmsprop(parameters, torch::optim::RMSpropOptions(0.01));
  const auto why = volt::optim::CapturableStep::obstacle(rmsprop, c10::DeviceType::CPU);
  REQUIRE(why.has_value());
  CHECK(why->find("torch::optim::RMSprop") != std::string::npos);
  CHECK(why->find("exactly torch::optim::Adam, AdamW or SGD") != std::string::npos);

  torch::optim::Adam adam(parameters, torch::optim::AdamOptions(0.01));
  const auto adam_why = volt::optim::CapturableStep::obstacle(adam, c10::DeviceType::CPU);
  if constexpr (volt::optim::has_capturable_step) {
    CHECK_FALSE(adam_why.has_value());
  } else {
    REQUIRE(adam_why.has_value());
    CHECK(adam_why->find(TORCH_VERSION) != std::string::npos);
  }
}

#if VOLT_TORCH_VERSION >= 20400
TEST_CASE("CapturableStep equals LibTorch's step: Adam, AdamW, amsgrad, SGD with momentum and nesterov") {
  SUBCASE("Adam with weight decay") {
    compare_with_libtorch<torch::optim::Adam>(torch::optim::AdamOptions(1e-2).weight_decay(0.1), 8, 2e-6);
  }
  SUBCASE("AdamW with amsgrad") {
    compare_with_libtorch<torch::optim::AdamW>(torch::optim::AdamWOptions(1e-2).weight_decay(0.05).amsgrad(true), 8,
                                               2e-6);
  }
  SUBCASE("SGD with momentum, dampening and weight decay") {
    compare_with_libtorch<torch::optim::SGD>(
        torch::optim::SGDOptions(0.05).momentum(0.9).dampening(0.1).weight_decay(1e-3), 8, 2e-6);
  }
  SUBCASE("SGD nesterov") {
    compare_with_libtorch<torch::optim::SGD>(torch::optim::SGDOptions(0.05).momentum(0.8).nesterov(true), 8, 2e-6);
  }
  SUBCASE("SGD without momentum") {
    compare_with_libtorch<torch::optim::SGD>(torch::optim::SGDOptions(0.1), 8, 2e-6);
  }
}

TEST_CASE("CapturableStep: Adam's step counts live on the device and reach LibTorch's state by write_back") {
  auto parameters = capturable_parameters(3);
  torch::optim::Adam optimizer(parameters, torch::optim::AdamOptions(1e-3));
  give_gradients(parameters, 0);
  optimizer.step();
  volt::optim::CapturableStep capturable(optimizer);
  for (int step = 1; step <= 4; ++step) {
    give_gradients(parameters, step);
    capturable.step();
  }
  auto& state = static_cast<torch::optim::AdamParamState&>(
      *optimizer.state().at(volt::compat::optimizer_state_key(parameters[0])));
  CHECK(state.step() == 1);  // the host has not been told yet
  capturable.write_back();
  CHECK(state.step() == 5);
  // The host steps, then reload() hands the count back to the device.
  give_gradients(parameters, 5);
  optimizer.step();
  capturable.reload();
  capturable.step();
  capturable.write_back();
  CHECK(state.step() == 7);
}

TEST_CASE("CapturableStep: a found-inf flag leaves parameters and step counts unchanged") {
  auto parameters = capturable_parameters(5);
  torch::optim::Adam optimizer(parameters, torch::optim::AdamOptions(1e-2));
  give_gradients(parameters, 0);
  optimizer.step();
  volt::optim::CapturableStep capturable(optimizer);
  const auto before = copies_of(parameters);
  give_gradients(parameters, 1);
  capturable.step(torch::ones({}));
  CHECK(largest_difference(parameters, before) == 0.0);
  capturable.write_back();
  auto& state = static_cast<torch::optim::AdamParamState&>(
      *optimizer.state().at(volt::compat::optimizer_state_key(parameters[2])));
  CHECK(state.step() == 1);
  capturable.step(torch::zeros({}));
  CHECK(largest_difference(parameters, before) > 0.0);
  capturable.write_back();
  CHECK(state.step() == 2);
}

TEST_CASE("CapturableStep refuses parameters that never stepped") {
  auto parameters = capturable_parameters(9);
  torch::optim::Adam optimizer(parameters, torch::optim::AdamOptions(1e-2));
  give_gradients(parameters, 0);
  CHECK_THROWS_WITH_AS(volt::optim::CapturableStep{optimizer}, doctest::Contains("step once first"),
                       std::invalid_argument);
}
#endif

TEST_CASE("clip_grad_norm_ and clip_grad_value_ equal torch::nn::utils' without reading the norm back") {
  for (const double max_norm : {0.5, 1e6}) {
    auto parameters = capturable_parameters(11);
    auto reference = copies_of(parameters);
    give_gradients(parameters, 1);
    give_gradients(reference, 1);
    const double expected_norm = torch::nn::utils::clip_grad_norm_(reference, max_norm);
    std::vector<torch::Tensor> gradients;
    for (auto& parameter : parameters) gradients.push_back(parameter.grad());
    const auto norm = volt::optim::clip_grad_norm_(gradients, max_norm);
    CHECK(norm.item<double>() == doctest::Approx(expected_norm).epsilon(1e-6));
    std::vector<torch::Tensor> clipped, expected;
    for (std::size_t i = 0; i < parameters.size(); ++i) {
      clipped.push_back(parameters[i].grad());
      expected.push_back(reference[i].grad());
    }
    CHECK(largest_difference(clipped, expected) <= 1e-6);
    if (max_norm < 1) CHECK(total_norm(clipped) == doctest::Approx(max_norm).epsilon(1e-4));
  }
  auto parameters = capturable_parameters(12);
  auto reference = copies_of(parameters);
  give_gradients(parameters, 2);
  give_gradients(reference, 2);
  torch::nn::utils::clip_grad_value_(reference, 0.7);
  std::vector<torch::Tensor> gradients, expected;
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    gradients.push_back(parameters[i].grad());
    expected.push_back(reference[i].grad());
  }
  volt::optim::clip_grad_value_(gradients, 0.7);
  CHECK(largest_difference(gradients, expected) == 0.0);
  CHECK(total_norm(gradients) > 0.0);
}

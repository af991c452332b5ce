#include "test_common.hpp"

#include <functional>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace {

using volt::optim::Implementation;

// Parameters of several shapes (a matrix, a vector, a 4-d kernel, a scalar-like one) in one dtype.
std::vector<torch::Tensor> make_parameters(std::uint64_t seed, torch::Device device = torch::kCPU,
                                           c10::ScalarType dtype = torch::kFloat) {
  torch::manual_seed(seed);
  std::vector<torch::Tensor> parameters;
  for (const auto& shape : std::vector<std::vector<std::int64_t>>{{7, 5}, {5}, {3, 2, 2, 2}, {1}, {11, 3}, {4}}) {
    parameters.push_back(torch::randn(shape, torch::TensorOptions().dtype(dtype)).to(device).requires_grad_());
  }
  return parameters;
}

std::vector<torch::Tensor> clone_parameters(const std::vector<torch::Tensor>& parameters) {
  std::vector<torch::Tensor> clones;
  for (const auto& parameter : parameters) clones.push_back(parameter.detach().clone().requires_grad_());
  return clones;
}

// Gradients for step `step`, the same for both parameter sets; some parameters get none on some steps
// (their step counts then differ from the others', exercising per-parameter bias corrections).
void set_gradients(std::vector<torch::Tensor>& parameters, int step, bool with_gaps = true) {
  torch::manual_seed(1000 + static_cast<std::uint64_t>(step));
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    auto gradient = torch::randn(parameters[i].sizes(), torch::TensorOptions().dtype(torch::kFloat)) *
                    (1.0 + static_cast<double>(i));
    if (with_gaps && ((i == 1 && step % 3 == 2) || (i == 4 && step < 2))) {
      parameters[i].mutable_grad() = torch::Tensor();
    } else {
      parameters[i].mutable_grad() = gradient.to(parameters[i].device(), parameters[i].scalar_type());
    }
  }
}

// Groups: parameters [0, 2), [2, 4), [4, 6), each with its own options.
template <class Options>
std::vector<torch::optim::OptimizerParamGroup> three_groups(const std::vector<torch::Tensor>& parameters,
                                                            const std::vector<Options>& options) {
  std::vector<torch::optim::OptimizerParamGroup> groups;
  for (std::size_t g = 0; g < 3; ++g) {
    groups.emplace_back(std::vector<torch::Tensor>{parameters[2 * g], parameters[2 * g + 1]},
                        std::make_unique<Options>(options[g]));
  }
  return groups;
}

void check_close(const std::vector<torch::Tensor>& actual, const std::vector<torch::Tensor>& expected, double rtol,
                 double atol, const std::string& what) {
  REQUIRE(actual.size() == expected.size());
  for (std::size_t i = 0; i < actual.size(); ++i) {
    INFO(what << ", tensor " << i << ", max difference "
              << (actual[i].detach().to(torch::kCPU, torch::kDouble) - expected[i].detach().to(torch::kCPU, torch::kDouble))
                     .abs()
                     .max()
                     .item<double>());
    CHECK(torch::allclose(actual[i].detach().to(torch::kCPU, torch::kDouble),
                          expected[i].detach().to(torch::kCPU, torch::kDouble), rtol, atol));
  }
}

template <class State>
const State& state_of(torch::optim::Optimizer& optimizer, const torch::Tensor& parameter) {
  return static_cast<const State&>(*optimizer.state().at(volt::compat::optimizer_state_key(parameter)));
}

// Steps `reference` with LibTorch and `tested` with volt for `steps` steps and compares parameters after
// each step and the states at the end.
template <class OptimizerType, class State>
void run_adam_like(OptimizerType& reference, std::vector<torch::Tensor>& reference_parameters, OptimizerType& tested,
                   std::vector<torch::Tensor>& tested_parameters, Implementation requested, Implementation expected_ran,
                   int steps, double rtol, double atol, bool amsgrad) {
  for (int step = 0; step < steps; ++step) {
    set_gradients(reference_parameters, step);
    set_gradients(tested_parameters, step);
    reference.step();
    CHECK((volt::optim::step(tested, requested) == expected_ran));
    check_close(tested_parameters, reference_parameters, rtol, atol, "parameters after step " + std::to_string(step));
  }
  for (std::size_t i = 0; i < tested_parameters.size(); ++i) {
    const auto& expected = state_of<State>(reference, reference_parameters[i]);
    const auto& actual = state_of<State>(tested, tested_parameters[i]);
    CHECK(actual.step() == expected.step());
    check_close({actual.exp_avg(), actual.exp_avg_sq()}, {expected.exp_avg(), expected.exp_avg_sq()}, rtol, atol,
                "moments");
    CHECK(actual.max_exp_avg_sq().defined() == amsgrad);
    if (amsgrad) check_close({actual.max_exp_avg_sq()}, {expected.max_exp_avg_sq()}, rtol, atol, "max_exp_avg_sq");
  }
}

template <class OptimizerType, class Options, class State>
void check_adam_like_combinations(Implementation requested, Implementation expected_ran, torch::Device device,
                                  double rtol, double atol) {
  for (double weight_decay : {0.0, 0.05}) {
    for (bool amsgrad : {false, true}) {
      CAPTURE(weight_decay);
      CAPTURE(amsgrad);
      std::vector<Options> options{Options(1e-2).weight_decay(weight_decay).amsgrad(amsgrad),
                                   Options(3e-3).betas({0.8, 0.99}).eps(1e-6).weight_decay(weight_decay).amsgrad(amsgrad),
                                   Options(5e-2).betas({0.5, 0.9}).weight_decay(weight_decay / 2).amsgrad(amsgrad)};
      auto reference_parameters = make_parameters(7, device);
      auto tested_parameters = clone_parameters(reference_parameters);
      OptimizerType reference(three_groups(reference_parameters, options));
      OptimizerType tested(three_groups(tested_parameters, options));
      run_adam_like<OptimizerType, State>(reference, reference_parameters, tested, tested_parameters, requested,
                                          expected_ran, 30, rtol, atol, amsgrad);
    }
  }
}

void check_sgd_combinations(torch::Device device, double rtol, double atol) {
  struct Case {
    double momentum, dampening, weight_decay;
    bool nesterov;
  };
  std::vector<Case> cases;
  for (double weight_decay : {0.0, 0.01}) {
    cases.push_back({0.0, 0.0, weight_decay, false});
    cases.push_back({0.9, 0.0, weight_decay, false});
    cases.push_back({0.9, 0.3, weight_decay, false});
    cases.push_back({0.9, 0.0, weight_decay, true});
    cases.push_back({0.5, 0.0, weight_decay, true});
  }
  for (const auto& c : cases) {
    CAPTURE(c.momentum);
    CAPTURE(c.dampening);
    CAPTURE(c.weight_decay);
    CAPTURE(c.nesterov);
    using torch::optim::SGDOptions;
    std::vector<SGDOptions> options{
        SGDOptions(0.1).momentum(c.momentum).dampening(c.dampening).weight_decay(c.weight_decay).nesterov(c.nesterov),
        SGDOptions(0.03).momentum(c.momentum).dampening(c.dampening).weight_decay(c.weight_decay).nesterov(c.nesterov),
        SGDOptions(0.01).momentum(c.momentum / 2).dampening(c.dampening).nesterov(c.nesterov)};
    auto reference_parameters = make_parameters(11, device);
    auto tested_parameters = clone_parameters(reference_parameters);
    torch::optim::SGD reference(three_groups(reference_parameters, options), SGDOptions(0.1));
    torch::optim::SGD tested(three_groups(tested_parameters, options), SGDOptions(0.1));
    for (int step = 0; step < 25; ++step) {
      set_gradients(reference_parameters, step);
      set_gradients(tested_parameters, step);
      reference.step();
      CHECK((volt::optim::step(tested, Implementation::multi_tensor) == Implementation::multi_tensor));
      check_close(tested_parameters, reference_parameters, rtol, atol, "parameters after step " + std::to_string(step));
    }
    CHECK(tested.state().size() == reference.state().size());
    if (c.momentum != 0) {
      for (std::size_t i = 0; i < tested_parameters.size(); ++i) {
        check_close({state_of<torch::optim::SGDParamState>(tested, tested_parameters[i]).momentum_buffer()},
                    {state_of<torch::optim::SGDParamState>(reference, reference_parameters[i]).momentum_buffer()}, rtol,
                    atol, "momentum buffer");
      }
    }
  }
}

bool cuda_or_skip(const char* test) {
  if (torch::cuda::is_available()) return true;
  MESSAGE("skipped (no CUDA device): " << std::string(test));
  return false;
}

}  // namespace

TEST_CASE("optim: implementation names round-trip and unknown names are rejected") {
  for (auto implementation : {Implementation::automatic, Implementation::fused, Implementation::multi_tensor,
                              Implementation::per_parameter}) {
    CHECK((volt::optim::parse_implementation(volt::optim::to_string(implementation)) == implementation));
  }
  VOLT_CHECK_THROWS_CONTAINS(volt::optim::parse_implementation("foreach"), std::invalid_argument,
                             "unknown optimizer step implementation \"foreach\"");
}

TEST_CASE("optim: multi-tensor Adam equals LibTorch's Adam (all options, three param groups, 30 steps, CPU)") {
  check_adam_like_combinations<torch::optim::Adam, torch::optim::AdamOptions, torch::optim::AdamParamState>(
      Implementation::multi_tensor, Implementation::multi_tensor, torch::kCPU, 1e-6, 1e-7);
}

TEST_CASE("optim: multi-tensor AdamW equals LibTorch's AdamW (all options, three param groups, 30 steps, CPU)") {
  check_adam_like_combinations<torch::optim::AdamW, torch::optim::AdamWOptions, torch::optim::AdamWParamState>(
      Implementation::multi_tensor, Implementation::multi_tensor, torch::kCPU, 1e-6, 1e-7);
}

TEST_CASE("optim: multi-tensor SGD equals LibTorch's SGD (momentum, dampening, nesterov, weight decay, CPU)") {
  check_sgd_combinations(torch::kCPU, 1e-6, 1e-7);
}

TEST_CASE("optim: automatic on CPU: Adam fused where the kernel exists, else multi-tensor; SGD LibTorch's loop") {
  const bool fused = volt::compat::fused_adam_available(c10::DeviceType::CPU, false);
  auto reference_parameters = make_parameters(3);
  auto tested_parameters = clone_parameters(reference_parameters);
  torch::optim::Adam reference(reference_parameters, torch::optim::AdamOptions(1e-2));
  torch::optim::Adam tested(tested_parameters, torch::optim::AdamOptions(1e-2));
  run_adam_like<torch::optim::Adam, torch::optim::AdamParamState>(
      reference, reference_parameters, tested, tested_parameters, Implementation::automatic,
      fused ? Implementation::fused : Implementation::multi_tensor, 5, 1e-4, 1e-6, false);

  auto parameters = make_parameters(3);
  torch::optim::SGD sgd(parameters, torch::optim::SGDOptions(0.1).momentum(0.9));
  set_gradients(parameters, 0, false);
  CHECK((volt::optim::step(sgd, Implementation::automatic) == Implementation::per_parameter));
  CHECK((volt::optim::step(sgd, Implementation::multi_tensor) == Implementation::multi_tensor));
}

TEST_CASE("optim: fused Adam and AdamW on CPU equal LibTorch's where the kernel exists") {
  if (!volt::compat::fused_adam_available(c10::DeviceType::CPU, false)) {
    MESSAGE("skipped: this LibTorch (" << TORCH_VERSION << ") has no fused Adam kernel for CPU");
    // Requesting fused then runs the multi-tensor step.
    auto parameters = make_parameters(5);
    torch::optim::Adam optimizer(parameters);
    set_gradients(parameters, 0, false);
    CHECK((volt::optim::step(optimizer, Implementation::fused) == Implementation::multi_tensor));
    return;
  }
  // The fused kernel computes the bias corrections in float32: a looser tolerance.
  check_adam_like_combinations<torch::optim::Adam, torch::optim::AdamOptions, torch::optim::AdamParamState>(
      Implementation::fused, Implementation::fused, torch::kCPU, 1e-4, 1e-6);
  check_adam_like_combinations<torch::optim::AdamW, torch::optim::AdamWOptions, torch::optim::AdamWParamState>(
      Implementation::fused, Implementation::fused, torch::kCPU, 1e-4, 1e-6);
}

TEST_CASE("optim: a group the fused kernel cannot take (non-contiguous parameter) runs multi-tensor") {
  if (!volt::compat::fused_adam_available(c10::DeviceType::CPU, false)) {
    MESSAGE("skipped: no fused Adam kernel for CPU in this LibTorch");
    return;
  }
  auto base = torch::randn({6, 4});
  auto reference_parameters = std::vector<torch::Tensor>{base.t().detach().clone().requires_grad_()};
  auto tested_parameters = std::vector<torch::Tensor>{base.detach().clone().t().requires_grad_()};
  REQUIRE_FALSE(tested_parameters[0].is_contiguous());
  torch::optim::Adam reference(reference_parameters, torch::optim::AdamOptions(1e-2));
  torch::optim::Adam tested(tested_parameters, torch::optim::AdamOptions(1e-2));
  for (int step = 0; step < 3; ++step) {
    set_gradients(reference_parameters, step, false);
    set_gradients(tested_parameters, step, false);
    reference.step();
    CHECK((volt::optim::step(tested, Implementation::fused) == Implementation::multi_tensor));
  }
  check_close(tested_parameters, reference_parameters, 1e-6, 1e-7, "non-contiguous parameter");
}

TEST_CASE("optim: parameters of two dtypes in one group step like LibTorch's") {
  auto reference_parameters = make_parameters(9);
  // Parameter 0 always has a gradient, so every step mixes the two dtypes (the fused kernel takes one).
  reference_parameters[0] = reference_parameters[0].detach().to(torch::kDouble).requires_grad_();
  auto tested_parameters = clone_parameters(reference_parameters);
  torch::optim::Adam reference(reference_parameters, torch::optim::AdamOptions(1e-2).weight_decay(0.1));
  torch::optim::Adam tested(tested_parameters, torch::optim::AdamOptions(1e-2).weight_decay(0.1));
  run_adam_like<torch::optim::Adam, torch::optim::AdamParamState>(reference, reference_parameters, tested,
                                                                  tested_parameters, Implementation::automatic,
                                                                  Implementation::multi_tensor, 10, 1e-6, 1e-7, false);
  CHECK((state_of<torch::optim::AdamParamState>(tested, tested_parameters[0]).exp_avg().scalar_type() == torch::kDouble));
}

TEST_CASE("optim: checkpoints move both ways between volt's steps and LibTorch's") {
  auto continued_parameters = make_parameters(21);
  auto volt_parameters = clone_parameters(continued_parameters);
  auto libtorch_parameters = clone_parameters(continued_parameters);
  const auto options = torch::optim::AdamOptions(2e-2).amsgrad(true).weight_decay(0.01);
  torch::optim::Adam reference(continued_parameters, options);
  torch::optim::Adam stepped_by_volt(volt_parameters, options);
  torch::optim::Adam stepped_by_libtorch(libtorch_parameters, options);

  // Four steps: the reference with LibTorch, the two others with volt.
  for (int step = 0; step < 4; ++step) {
    set_gradients(continued_parameters, step);
    set_gradients(volt_parameters, step);
    set_gradients(libtorch_parameters, step);
    reference.step();
    CHECK((volt::optim::step(stepped_by_volt, Implementation::multi_tensor) == Implementation::multi_tensor));
    CHECK((volt::optim::step(stepped_by_libtorch, Implementation::multi_tensor) == Implementation::multi_tensor));
  }

  // volt's state saved and loaded into a fresh LibTorch Adam over copies of the parameters.
  std::stringstream archive;
  torch::save(stepped_by_volt, archive);
  auto loaded_parameters = clone_parameters(volt_parameters);
  torch::optim::Adam loaded(loaded_parameters, options);
  torch::load(loaded, archive);
  CHECK(loaded.state().size() == reference.state().size());

  // Four more steps: the reference and the loaded optimizer with LibTorch, the others with volt.
  for (int step = 4; step < 8; ++step) {
    for (auto* parameters : {&continued_parameters, &volt_parameters, &libtorch_parameters, &loaded_parameters}) {
      set_gradients(*parameters, step);
    }
    reference.step();
    loaded.step();
    volt::optim::step(stepped_by_volt, Implementation::multi_tensor);
    stepped_by_libtorch.step();  // a LibTorch step on state volt wrote
  }
  check_close(loaded_parameters, continued_parameters, 1e-6, 1e-7, "LibTorch continuing volt's checkpoint");
  check_close(volt_parameters, continued_parameters, 1e-6, 1e-7, "volt all along");
  check_close(libtorch_parameters, continued_parameters, 1e-6, 1e-7, "LibTorch continuing volt's state");
  for (std::size_t i = 0; i < continued_parameters.size(); ++i) {
    CHECK(state_of<torch::optim::AdamParamState>(loaded, loaded_parameters[i]).step() ==
          state_of<torch::optim::AdamParamState>(reference, continued_parameters[i]).step());
  }

  // And a LibTorch checkpoint continued by volt.
  std::stringstream libtorch_archive;
  torch::save(reference, libtorch_archive);
  auto resumed_parameters = clone_parameters(continued_parameters);
  torch::optim::Adam resumed(resumed_parameters, options);
  torch::load(resumed, libtorch_archive);
  for (int step = 8; step < 12; ++step) {
    set_gradients(continued_parameters, step);
    set_gradients(resumed_parameters, step);
    reference.step();
    CHECK((volt::optim::step(resumed, Implementation::multi_tensor) == Implementation::multi_tensor));
  }
  check_close(resumed_parameters, continued_parameters, 1e-6, 1e-7, "volt continuing LibTorch's checkpoint");
}

TEST_CASE("optim: SGD momentum buffers written by volt continue under LibTorch") {
  auto reference_parameters = make_parameters(4);
  auto tested_parameters = clone_parameters(reference_parameters);
  const auto options = torch::optim::SGDOptions(0.05).momentum(0.9).nesterov(true);
  torch::optim::SGD reference(reference_parameters, options);
  torch::optim::SGD tested(tested_parameters, options);
  for (int step = 0; step < 6; ++step) {
    set_gradients(reference_parameters, step);
    set_gradients(tested_parameters, step);
    reference.step();
    if (step < 3) {
      volt::optim::step(tested, Implementation::multi_tensor);
    } else {
      tested.step();
    }
  }
  check_close(tested_parameters, reference_parameters, 1e-6, 1e-7, "mixed volt and LibTorch SGD steps");
}

namespace {
struct LoggingAdam : torch::optim::Adam {
  using torch::optim::Adam::Adam;
  int steps = 0;
  torch::Tensor step(LossClosure closure = nullptr) override {
    ++steps;
    return torch::optim::Adam::step(std::move(closure));
  }
};
}  // namespace

TEST_CASE("optim: optimizers volt does not take run their own step()") {
  SUBCASE("a subclass of Adam keeps its overridden step()") {
    auto parameters = make_parameters(1);
    LoggingAdam optimizer(parameters);
    set_gradients(parameters, 0, false);
    CHECK((volt::optim::step(optimizer) == Implementation::per_parameter));
    CHECK(optimizer.steps == 1);
  }
  SUBCASE("RMSprop") {
    auto parameters = make_parameters(1);
    auto reference_parameters = clone_parameters(parameters);
    torch::optim::RMSprop optimizer(parameters, torch::optim::RMSpropOptions(1e-2));
    torch::optim::RMSprop reference(reference_parameters, torch::optim::RMSpropOptions(1e-2));
    set_gradients(parameters, 0, false);
    set_gradients(reference_parameters, 0, false);
    CHECK((volt::optim::step(optimizer, Implementation::fused) == Implementation::per_parameter));
    reference.step();
    check_close(parameters, reference_parameters, 0, 0, "RMSprop");
  }
  SUBCASE("a parameter listed in two groups") {
    auto parameters = make_parameters(1);
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(std::vector<torch::Tensor>{parameters[0], parameters[1]});
    groups.emplace_back(std::vector<torch::Tensor>{parameters[0]});
    torch::optim::SGD optimizer(std::move(groups), torch::optim::SGDOptions(0.1));
    set_gradients(parameters, 0, false);
    const auto before = parameters[0].detach().clone();
    CHECK((volt::optim::step(optimizer, Implementation::multi_tensor) == Implementation::per_parameter));
    // LibTorch's loop updated it twice.
    CHECK(torch::allclose(parameters[0].detach(), before - 0.2 * parameters[0].grad()));
  }
  SUBCASE("sparse gradients") {
    auto embedding = torch::nn::Embedding(torch::nn::EmbeddingOptions(10, 3).sparse(true));
    torch::optim::SGD optimizer(embedding->parameters(), torch::optim::SGDOptions(0.1));
    embedding->forward(torch::tensor({1, 4}, torch::kLong)).sum().backward();
    REQUIRE(embedding->weight.grad().is_sparse());
    const auto before = embedding->weight.detach().clone();
    CHECK((volt::optim::step(optimizer, Implementation::multi_tensor) == Implementation::per_parameter));
    CHECK(torch::allclose(embedding->weight.detach().index({1}), before.index({1}) - 0.1));
    CHECK(torch::equal(embedding->weight.detach().index({0}), before.index({0})));
  }
  SUBCASE("amsgrad switched on after the state was created without it: left to LibTorch, changing nothing") {
    auto parameters = make_parameters(1);
    torch::optim::Adam optimizer(parameters, torch::optim::AdamOptions(1e-2));
    set_gradients(parameters, 0, false);
    volt::optim::step(optimizer, Implementation::multi_tensor);
    static_cast<torch::optim::AdamOptions&>(optimizer.param_groups()[0].options()).amsgrad(true);
    const auto before = parameters[0].detach().clone();
    CHECK_FALSE(volt::optim::try_adam_step(optimizer, Implementation::automatic).has_value());
    CHECK(torch::equal(parameters[0].detach(), before));
    CHECK(state_of<torch::optim::AdamParamState>(optimizer, parameters[0]).step() == 1);
  }
}

TEST_CASE("optim: per_parameter requested, directly or as the default, runs LibTorch's loop") {
  auto parameters = make_parameters(2);
  torch::optim::Adam optimizer(parameters);
  set_gradients(parameters, 0, false);
  volt::optim::reset_step_counts();
  CHECK((volt::optim::step(optimizer, Implementation::per_parameter) == Implementation::per_parameter));
  {
    volt::optim::ScopedDefaultImplementation opt_out(Implementation::per_parameter);
    CHECK((volt::optim::default_implementation() == Implementation::per_parameter));
    CHECK((volt::optim::step(optimizer) == Implementation::per_parameter));
  }
  CHECK((volt::optim::default_implementation() == Implementation::automatic));
  CHECK((volt::optim::step(optimizer) != Implementation::per_parameter));
  const auto counts = volt::optim::step_counts();
  CHECK(counts.per_parameter == 2);
  CHECK(counts.multi_tensor + counts.fused == 1);
  CHECK(state_of<torch::optim::AdamParamState>(optimizer, parameters[0]).step() == 3);
}

TEST_CASE("optim: the precision policies step through volt::optim::step, with the opt-out") {
  auto parameters = make_parameters(6);
  auto reference_parameters = clone_parameters(parameters);
  torch::optim::AdamW optimizer(parameters, torch::optim::AdamWOptions(1e-2));
  torch::optim::AdamW reference(reference_parameters, torch::optim::AdamWOptions(1e-2));
  volt::FP32 fp32;
  volt::BF16Autocast bf16;
  bf16.setup(torch::kCPU);
  volt::optim::reset_step_counts();
  int before_step_calls = 0;
  for (int step = 0; step < 4; ++step) {
    set_gradients(parameters, step);
    set_gradients(reference_parameters, step);
    reference.step();
    const bool stepped = step % 2 == 0 ? fp32.optimizer_step(optimizer, [&] { ++before_step_calls; })
                                       : bf16.optimizer_step(optimizer, [&] { ++before_step_calls; });
    CHECK(stepped);
  }
  CHECK(before_step_calls == 4);
  CHECK(volt::optim::step_counts().multi_tensor + volt::optim::step_counts().fused == 4);
  CHECK(volt::optim::step_counts().per_parameter == 0);
  check_close(parameters, reference_parameters, 1e-4, 1e-6, "policy steps");

  volt::optim::ScopedDefaultImplementation opt_out(Implementation::per_parameter);
  set_gradients(parameters, 9);
  fp32.optimizer_step(optimizer, [] {});
  CHECK(volt::optim::step_counts().per_parameter == 1);
  CHECK(volt::optim::step_counts().multi_tensor + volt::optim::step_counts().fused == 4);
}

TEST_CASE("optim: the GradScaler skips volt's step on inf/NaN and leaves the state untouched") {
  auto parameters = make_parameters(8);
  auto reference_parameters = clone_parameters(parameters);
  torch::optim::Adam optimizer(parameters, torch::optim::AdamOptions(1e-2));
  torch::optim::Adam reference(reference_parameters, torch::optim::AdamOptions(1e-2));
  volt::GradScaler scaler({.init_scale = 1024.0}, torch::kCPU);
  volt::optim::reset_step_counts();
  for (int step = 0; step < 4; ++step) {
    set_gradients(parameters, step, false);
    set_gradients(reference_parameters, step, false);
    // The scaled gradients, as backward on a scaled loss would leave them.
    for (auto& parameter : parameters) parameter.mutable_grad().mul_(scaler.get_scale());
    if (step == 2) parameters[3].mutable_grad().fill_(std::numeric_limits<float>::infinity());
    const bool stepped = scaler.step(optimizer);
    scaler.update();
    CHECK(stepped == (step != 2));
    if (step != 2) reference.step();
  }
  CHECK(volt::optim::step_counts().multi_tensor + volt::optim::step_counts().fused == 3);
  CHECK(volt::optim::step_counts().per_parameter == 0);
  CHECK(state_of<torch::optim::AdamParamState>(optimizer, parameters[0]).step() == 3);
  check_close(parameters, reference_parameters, 1e-4, 1e-6, "scaled steps");
}

TEST_CASE("optim: CUDA multi-tensor and fused Adam/AdamW and multi-tensor SGD equal LibTorch's") {
  if (!cuda_or_skip("CUDA optimizer steps")) return;
  const torch::Device cuda(torch::kCUDA, 0);
  check_adam_like_combinations<torch::optim::Adam, torch::optim::AdamOptions, torch::optim::AdamParamState>(
      Implementation::multi_tensor, Implementation::multi_tensor, cuda, 1e-5, 1e-6);
  check_adam_like_combinations<torch::optim::AdamW, torch::optim::AdamWOptions, torch::optim::AdamWParamState>(
      Implementation::multi_tensor, Implementation::multi_tensor, cuda, 1e-5, 1e-6);
  check_sgd_combinations(cuda, 1e-5, 1e-6);
  if (!volt::compat::fused_adam_available(c10::DeviceType::CUDA, true)) {
    MESSAGE("skipped: this LibTorch (" << TORCH_VERSION << ") has no fused AdamW kernel for CUDA");
    return;
  }
  check_adam_like_combinations<torch::optim::Adam, torch::optim::AdamOptions, torch::optim::AdamParamState>(
      Implementation::automatic, Implementation::fused, cuda, 1e-4, 1e-6);
  check_adam_like_combinations<torch::optim::AdamW, torch::optim::AdamWOptions, torch::optim::AdamWParamState>(
      Implementation::fused, Implementation::fused, cuda, 1e-4, 1e-6);
}

TEST_CASE("optim: CUDA GradScaler with fused Adam skips on inf and steps otherwise") {
  if (!cuda_or_skip("CUDA GradScaler with fused Adam")) return;
  const torch::Device cuda(torch::kCUDA, 0);
  auto parameters = make_parameters(8, cuda);
  auto reference_parameters = clone_parameters(parameters);
  torch::optim::Adam optimizer(parameters, torch::optim::AdamOptions(1e-2));
  torch::optim::Adam reference(reference_parameters, torch::optim::AdamOptions(1e-2));
  volt::GradScaler scaler({.init_scale = 1024.0}, cuda);
  for (int step = 0; step < 4; ++step) {
    set_gradients(parameters, step, false);
    set_gradients(reference_parameters, step, false);
    for (auto& parameter : parameters) parameter.mutable_grad().mul_(scaler.get_scale());
    if (step == 1) parameters[0].mutable_grad().fill_(std::numeric_limits<float>::quiet_NaN());
    CHECK(scaler.step(optimizer) == (step != 1));
    scaler.update();
    if (step != 1) reference.step();
  }
  CHECK(state_of<torch::optim::AdamParamState>(optimizer, parameters[0]).step() == 3);
  check_close(parameters, reference_parameters, 1e-4, 1e-6, "CUDA scaled steps");
}

TEST_CASE("optim: parameters on two devices are left to LibTorch") {
  if (!cuda_or_skip("parameters on two devices")) return;
  std::vector<torch::Tensor> parameters{torch::randn({3}).requires_grad_(),
                                        torch::randn({3}, torch::kCUDA).requires_grad_()};
  torch::optim::SGD optimizer(parameters, torch::optim::SGDOptions(0.1));
  parameters[0].mutable_grad() = torch::ones({3});
  parameters[1].mutable_grad() = torch::ones({3}, torch::kCUDA);
  CHECK((volt::optim::step(optimizer, Implementation::multi_tensor) == Implementation::per_parameter));
}

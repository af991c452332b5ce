#include "test_common.hpp"

#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

using volt_test::cuda_here;

namespace {

struct TinyNet : torch::nn::Module {
  torch::nn::Linear linear{nullptr};
  torch::nn::BatchNorm1d norm{nullptr};
  TinyNet() {
    linear = register_module("linear", torch::nn::Linear(4, 3));
    norm = register_module("norm", torch::nn::BatchNorm1d(3));
  }
  torch::Tensor forward(const torch::Tensor& input) { return norm->forward(linear->forward(input)); }
};

template <class Precision>
void check_true_precision_conversions(c10::ScalarType dtype) {
  Precision precision;
  // 16-true's setup() on a CPU refuses a LibTorch without float16 matrix multiplication (checked in
  // tests/reliability/bad_files_test.cpp); the conversions below do not depend on it.
  if constexpr (!std::is_same_v<Precision, volt::FP16True>) precision.setup(torch::kCPU);
  TinyNet net;
  precision.convert_module(net);
  for (const auto& parameter : net.parameters()) CHECK((parameter.scalar_type() == dtype));
  CHECK((net.norm->running_mean.scalar_type() == dtype));
  CHECK((net.norm->running_var.scalar_type() == dtype));
  CHECK((net.norm->num_batches_tracked.scalar_type() == torch::kLong));
  for (const auto& parameter : net.parameters()) CHECK(parameter.requires_grad());

  const auto converted = precision.convert_input(torch::ones({2, 4}));
  CHECK((converted.scalar_type() == dtype));
  const auto labels = torch::arange(2);
  CHECK((precision.convert_input(labels).scalar_type() == torch::kLong));
  CHECK((precision.convert_input(torch::ones({1}, torch::kBool)).scalar_type() == torch::kBool));

  {
    auto scope = precision.forward_context();
    CHECK((torch::ones({1}).scalar_type() == dtype));
    CHECK((torch::get_default_dtype() == caffe2::TypeMeta::fromScalarType(dtype)));
  }
  CHECK((torch::ones({1}).scalar_type() == torch::kFloat));
  {
    auto scope = precision.init_context();
    CHECK((torch::nn::Linear(2, 2)->weight.scalar_type() == dtype));
  }
  const auto loss = torch::tensor(1.0);
  CHECK(precision.pre_backward(loss).is_same(loss));
  CHECK(precision.scaler() == nullptr);
}

}  // namespace

TEST_CASE("policy names and kinds are Lightning's") {
  static_assert(volt::FP32::name == "32-true");
  static_assert(volt::FP64::name == "64-true");
  static_assert(volt::FP16True::name == "16-true");
  static_assert(volt::BF16True::name == "bf16-true");
  static_assert(volt::FP16Autocast::name == "16-mixed");
  static_assert(volt::BF16Autocast::name == "bf16-mixed");
  static_assert(!volt::FP32::is_autocast && !volt::FP64::is_autocast && !volt::FP16True::is_autocast &&
                !volt::BF16True::is_autocast);
  static_assert(volt::FP16Autocast::is_autocast && volt::BF16Autocast::is_autocast);
  static_assert(std::is_default_constructible_v<volt::FP16Autocast>);
  static_assert(std::is_empty_v<volt::FP32>);
  static_assert(std::is_same_v<decltype(volt::FP32{}.forward_context()), volt::NoOpGuard>);
  static_assert(std::is_same_v<decltype(volt::BF16True{}.forward_context()), volt::DefaultDtypeGuard>);
  static_assert(std::is_same_v<decltype(volt::BF16Autocast{}.forward_context()), volt::AutocastGuard>);
}

TEST_CASE("compile-time compatibility rules") {
  static_assert(!volt::precision_supported<volt::CPU, volt::FP16Autocast>::value);
  static_assert(!volt::precision_supported<volt::MPS, volt::FP64>::value);
  static_assert(volt::precision_supported<volt::CPU, volt::BF16Autocast>::value);
  static_assert(volt::precision_supported<volt::Auto, volt::FP16Autocast>::value);
  static_assert(volt::precision_supported<volt::MPS, volt::FP16Autocast>::value);
  static_assert(volt::precision_supported<volt::CUDA, volt::FP64>::value);
  volt::check_precision_supported<volt::CUDA, volt::FP16Autocast>();
  volt::check_precision_supported<volt::CPU, volt::BF16Autocast>();
  volt::check_precision_supported<volt::MPS, volt::FP32>();
}

TEST_CASE("FP32 changes nothing") {
  volt::FP32 precision;
  precision.setup(torch::kCPU);
  TinyNet net;
  precision.convert_module(net);
  CHECK((net.linear->weight.scalar_type() == torch::kFloat));
  auto batch = std::vector<torch::Tensor>{torch::ones({2}, torch::kDouble)};
  const auto* data = batch[0].data_ptr();
  const auto converted = precision.convert_input(std::move(batch));
  CHECK(converted[0].data_ptr() == data);
  CHECK((converted[0].scalar_type() == torch::kDouble));
  auto scope = precision.forward_context();
  CHECK_FALSE(volt::compat::autocast_enabled(torch::kCPU));
}

TEST_CASE("true precisions convert the module's floating tensors, floating inputs and the default dtype") {
  SUBCASE("64-true") { check_true_precision_conversions<volt::FP64>(torch::kDouble); }
  SUBCASE("16-true") { check_true_precision_conversions<volt::FP16True>(torch::kHalf); }
  SUBCASE("bf16-true") { check_true_precision_conversions<volt::BF16True>(torch::kBFloat16); }
}

TEST_CASE("true precisions convert floating tensors inside nested batches") {
  volt::BF16True precision;
  auto batch = std::make_tuple(torch::ones({2}), std::vector<torch::Tensor>{torch::ones({1}), torch::arange(3)},
                               std::string("name"), 7);
  const auto converted = precision.convert_input(batch);
  CHECK((std::get<0>(converted).scalar_type() == torch::kBFloat16));
  CHECK((std::get<1>(converted)[0].scalar_type() == torch::kBFloat16));
  CHECK((std::get<1>(converted)[1].scalar_type() == torch::kLong));
  CHECK(std::get<2>(converted) == "name");
  CHECK(std::get<3>(converted) == 7);
  CHECK((std::get<0>(batch).scalar_type() == torch::kFloat));

  torch::data::Example<> example{torch::ones({2, 2}, torch::kDouble), torch::tensor({1, 0})};
  const auto converted_example = volt::FP16True{}.convert_input(example);
  CHECK((converted_example.data.scalar_type() == torch::kHalf));
  CHECK((converted_example.target.scalar_type() == torch::kLong));
}

TEST_CASE("FP64 refuses an MPS device at setup") {
  volt::FP64 precision;
  CHECK_THROWS_WITH_AS(precision.setup(torch::Device(torch::kMPS, 0)),
                       doctest::Contains("FP64 is not supported on MPS devices"), volt::MisconfigurationError);
}

TEST_CASE("FP16Autocast on a CPU device warns once and runs as bf16 without a scaler") {
  volt_test::CaptureLog log;
  volt::FP16Autocast precision;
  precision.setup(torch::kCPU);
  CHECK(log.warned("but AMP with fp16 is not supported on CPU. Using `precision='bf16-mixed'`"));
  CHECK(log.warnings.size() == 1);
  CHECK(log.informed("Using bfloat16 Automatic Mixed Precision (AMP)"));
  CHECK((precision.autocast_dtype() == torch::kBFloat16));
  CHECK(precision.scaler() == nullptr);
  torch::nn::Linear linear(4, 2);
  {
    auto scope = precision.forward_context();
    CHECK((linear->forward(torch::ones({1, 4})).scalar_type() == torch::kBFloat16));
  }
  CHECK_FALSE(volt::compat::autocast_enabled(torch::kCPU));
  volt::FP16Autocast second;
  second.setup(torch::kCPU);
  CHECK(log.warnings.size() == 1);
}

TEST_CASE("BF16Autocast on CPU: Lightning's info line, fp32 weights, inputs untouched, autocast in the step") {
  volt_test::CaptureLog log;
  volt::BF16Autocast precision;
  CHECK_THROWS_AS((void)precision.forward_context(), std::logic_error);
  precision.setup(torch::kCPU);
  CHECK(log.infos == std::vector<std::string>{"Using bfloat16 Automatic Mixed Precision (AMP)"});
  CHECK(log.warnings.empty());
  TinyNet net;
  precision.convert_module(net);
  CHECK((net.linear->weight.scalar_type() == torch::kFloat));
  auto input = torch::ones({2, 4});
  const auto* data = input.data_ptr();
  const auto converted = precision.convert_input(std::move(input));
  CHECK(converted.data_ptr() == data);
  {
    auto scope = precision.forward_context();
    CHECK((net.linear->forward(converted).scalar_type() == torch::kBFloat16));
  }
  const auto loss = torch::tensor(3.0F);
  CHECK(precision.pre_backward(loss).is_same(loss));
  CHECK(precision.scaler() == nullptr);

  auto weight = torch::ones({1}, torch::requires_grad());
  weight.mutable_grad() = torch::ones({1});
  torch::optim::SGD optimizer({weight}, torch::optim::SGDOptions(0.5));
  bool before_step_ran = false;
  CHECK(precision.optimizer_step(optimizer, [&] { before_step_ran = true; }));
  CHECK(before_step_ran);
  CHECK(weight.item<float>() == 0.5F);
}

TEST_CASE("mixed precision refuses LBFGS as Lightning does") {
  volt_test::CaptureLog log;
  volt::BF16Autocast precision;
  precision.setup(torch::kCPU);
  auto weight = torch::ones({1}, torch::requires_grad());
  torch::optim::LBFGS optimizer({weight});
  CHECK_THROWS_WITH_AS(precision.optimizer_step(optimizer, [] {}), "AMP and the LBFGS optimizer are not compatible.",
                       volt::MisconfigurationError);
}

TEST_CASE("FP16Autocast restores scaler state loaded before setup; bf16 ignores it") {
  volt::GradScaler source({.init_scale = 256.0});
  source.scale(torch::tensor(1.0F));
  torch::serialize::OutputArchive output;
  source.save(output);
  std::stringstream stream;
  output.save_to(stream);
  torch::serialize::InputArchive input;
  input.load_from(stream);

  volt::FP16Autocast fp16;
  fp16.load(input);
  REQUIRE(fp16.scaler() != nullptr);
  CHECK(fp16.scaler()->get_scale() == 256.0);
  // setup() for a GPU keeps the loaded scaler (it creates one only when there is none); setup() touches no
  // device memory for a kept scaler, so this runs without a GPU too.
  fp16.setup(torch::Device(torch::kCUDA, 0));
  REQUIRE(fp16.scaler() != nullptr);
  CHECK(fp16.scaler()->get_scale() == 256.0);
  // What it saves is what was loaded: read back into a fresh policy.
  torch::serialize::OutputArchive saved;
  fp16.save(saved);
  std::stringstream saved_stream;
  saved.save_to(saved_stream);
  torch::serialize::InputArchive reread;
  reread.load_from(saved_stream);
  volt::FP16Autocast copy;
  copy.load(reread);
  REQUIRE(copy.scaler() != nullptr);
  CHECK(copy.scaler()->get_scale() == 256.0);
  // On a CPU device fp16 autocast runs as bf16, which needs no scaler: setup() drops it.
  {
    volt_test::CaptureLog quiet;
    copy.setup(torch::kCPU);
  }
  CHECK(copy.scaler() == nullptr);

  volt::BF16Autocast bf16;
  CHECK_NOTHROW(bf16.load(input));
  CHECK(bf16.scaler() == nullptr);
}

TEST_CASE("the AMP step order: unscale, before_step (sees unscaled gradients), step unless inf, update") {
  // FP16Autocast has a scaler only on a GPU; on CPU the same sequence is checked with a scaler directly.
  volt::GradScaler scaler({.init_scale = 1024.0, .use_fused_kernels = false}, torch::kCPU);
  auto weight = torch::ones({2}, torch::requires_grad());
  torch::optim::SGD optimizer({weight}, torch::optim::SGDOptions(1.0));

  scaler.scale((weight * torch::tensor({1.0F, 2.0F})).sum()).backward();
  std::vector<std::string> events;
  const bool stepped = volt::detail::amp_optimizer_step(scaler, optimizer, [&] {
    events.push_back(scaler.stage(optimizer) == volt::GradScaler::Stage::unscaled ? "before_step: unscaled"
                                                                                   : "before_step: not unscaled");
    CHECK(torch::equal(weight.grad(), torch::tensor({1.0F, 2.0F})));
    CHECK(torch::equal(weight, torch::ones({2})));
  });
  CHECK(stepped);
  CHECK(events == std::vector<std::string>{"before_step: unscaled"});
  CHECK(torch::equal(weight, torch::tensor({0.0F, -1.0F})));
  CHECK((scaler.stage(optimizer) == volt::GradScaler::Stage::ready));

  optimizer.zero_grad();
  scaler.scale((weight * 1e30F).sum() * 1e30F).backward();
  const auto before = weight.clone();
  CHECK_FALSE(volt::detail::amp_optimizer_step(scaler, optimizer, [] {}));
  CHECK(torch::equal(weight, before));
  CHECK(scaler.get_scale() == 512.0);
}

TEST_CASE("GPU: FP16Autocast on CUDA scales the loss, skips an overflowing step and halves the scale") {
  if (!cuda_here("FP16Autocast loss x 1e30 overflow on CUDA")) return;
  volt_test::CaptureLog log;
  const torch::Device device(torch::kCUDA, 0);
  volt::FP16Autocast defaults;
  defaults.setup(device);
  CHECK(log.informed("Using 16bit Automatic Mixed Precision (AMP)"));
  CHECK(log.warnings.empty());
  REQUIRE(defaults.scaler() != nullptr);
  CHECK(defaults.scaler()->scale_tensor().is_cuda());
  CHECK(defaults.scaler()->get_scale() == 65536.0);

  // A smaller initial scale, so the first finite step cannot overflow fp16 (65536 could, legitimately).
  volt::FP16Autocast precision(volt::GradScalerOptions{.init_scale = 1024.0});
  precision.setup(device);

  torch::manual_seed(0);
  torch::nn::Linear linear(8, 1);
  linear->to(device);
  torch::optim::SGD optimizer(linear->parameters(), torch::optim::SGDOptions(0.1));
  const auto input = torch::randn({4, 8}, device);
  const auto target = torch::randn({4, 1}, device);

  auto train_step = [&](double loss_factor) {
    optimizer.zero_grad();
    torch::Tensor loss;
    {
      auto scope = precision.forward_context();
      const auto output = linear->forward(input);
      CHECK((output.scalar_type() == torch::kHalf));
      loss = torch::mse_loss(output, target) * loss_factor;
    }
    precision.pre_backward(loss).backward();
    bool unscaled_in_before_step = false;
    const bool stepped = precision.optimizer_step(optimizer, [&] {
      unscaled_in_before_step = precision.scaler()->stage(optimizer) == volt::GradScaler::Stage::unscaled;
    });
    CHECK(unscaled_in_before_step);
    return stepped;
  };

  const auto weight_before = linear->weight.clone();
  CHECK(train_step(1.0));
  CHECK_FALSE(torch::equal(linear->weight, weight_before));
  CHECK(precision.scaler()->get_scale() == 1024.0);

  const auto weight_finite = linear->weight.clone();
  const auto bias_finite = linear->bias.clone();
  CHECK_FALSE(train_step(1e30));
  CHECK(torch::equal(linear->weight, weight_finite));
  CHECK(torch::equal(linear->bias, bias_finite));
  CHECK(precision.scaler()->get_scale() == 512.0);
  CHECK_FALSE(train_step(1e30));
  CHECK(precision.scaler()->get_scale() == 256.0);
  CHECK(train_step(1.0));
}

TEST_CASE("GPU: BF16Autocast on CUDA uses no scaler and autocasts to bf16") {
  if (!cuda_here("BF16Autocast on CUDA")) return;
  volt_test::CaptureLog log;
  volt::BF16Autocast precision;
  precision.setup(torch::Device(torch::kCUDA, 0));
  CHECK(precision.scaler() == nullptr);
  torch::nn::Linear linear(4, 2);
  linear->to(torch::kCUDA);
  auto scope = precision.forward_context();
  CHECK((linear->forward(torch::ones({1, 4}, torch::kCUDA)).scalar_type() == torch::kBFloat16));
}

#include "test_common.hpp"

#include <ATen/autocast_mode.h>

#include <type_traits>

using volt_test::cuda_here;

namespace {

}  // namespace

TEST_CASE("AutocastGuard on CPU: matmul and linear run in bf16, the rest stays float") {
  torch::manual_seed(0);
  torch::nn::Linear linear(8, 4);
  const auto input = torch::randn({3, 8});
  {
    volt::AutocastGuard autocast(torch::kCPU, torch::kBFloat16);
    CHECK(volt::compat::autocast_enabled(torch::kCPU));
    CHECK((linear->forward(input).scalar_type() == torch::kBFloat16));
    CHECK((torch::matmul(input, input.t()).scalar_type() == torch::kBFloat16));
    CHECK((torch::mm(input, input.t()).scalar_type() == torch::kBFloat16));
    CHECK((input.sum().scalar_type() == torch::kFloat));
    CHECK((input.softmax(1).scalar_type() == torch::kFloat));
    CHECK((torch::mse_loss(input, torch::zeros_like(input)).scalar_type() == torch::kFloat));
    // fp64 tensors are not autocast-eligible.
    const auto doubles = input.to(torch::kDouble);
    CHECK((torch::mm(doubles, doubles.t()).scalar_type() == torch::kDouble));
  }
  CHECK_FALSE(volt::compat::autocast_enabled(torch::kCPU));
  CHECK((linear->forward(input).scalar_type() == torch::kFloat));
}

TEST_CASE("AutocastGuard scopes nest and restore enabled flag, dtype and cache flag") {
  const auto input = torch::randn({2, 2});
  const bool cache_before = volt::compat::autocast_cache_enabled();
  {
    volt::AutocastGuard outer(torch::kCPU, torch::kBFloat16);
    {
      volt::AutocastGuard inner(torch::kCPU, torch::kBFloat16, {.enabled = false, .cache_enabled = false});
      CHECK_FALSE(volt::compat::autocast_enabled(torch::kCPU));
      CHECK_FALSE(volt::compat::autocast_cache_enabled());
      CHECK((torch::mm(input, input).scalar_type() == torch::kFloat));
    }
    CHECK(volt::compat::autocast_enabled(torch::kCPU));
    CHECK(volt::compat::autocast_cache_enabled());
    CHECK((volt::compat::autocast_dtype(torch::kCPU) == torch::kBFloat16));
    CHECK((torch::mm(input, input).scalar_type() == torch::kBFloat16));
    {
      volt::AutocastGuard inner(torch::kCPU, torch::kBFloat16);
      CHECK((torch::mm(input, input).scalar_type() == torch::kBFloat16));
    }
    CHECK(volt::compat::autocast_enabled(torch::kCPU));
  }
  CHECK_FALSE(volt::compat::autocast_enabled(torch::kCPU));
  CHECK(volt::compat::autocast_cache_enabled() == cache_before);
}

TEST_CASE("the autocast cache of cast weights survives inner scopes and is cleared when the outermost exits") {
  auto weight = torch::randn({4, 4}, torch::requires_grad());
  torch::Tensor cached;
  {
    volt::AutocastGuard outer(torch::kCPU, torch::kBFloat16);
    cached = at::autocast::cached_cast(torch::kBFloat16, weight, torch::kCPU);
    CHECK((cached.scalar_type() == torch::kBFloat16));
    {
      volt::AutocastGuard inner(torch::kCPU, torch::kBFloat16);
      CHECK(at::autocast::cached_cast(torch::kBFloat16, weight, torch::kCPU).is_same(cached));
    }
    // Still cached after the inner scope: the cache holds the second reference.
    CHECK(at::autocast::cached_cast(torch::kBFloat16, weight, torch::kCPU).is_same(cached));
    CHECK(cached.use_count() == 2);
  }
  CHECK(cached.use_count() == 1);
  volt::AutocastGuard again(torch::kCPU, torch::kBFloat16);
  CHECK_FALSE(at::autocast::cached_cast(torch::kBFloat16, weight, torch::kCPU).is_same(cached));
}

TEST_CASE("AutocastSafeNoGradGuard drops casts made without grad so a later grad-mode use recomputes them") {
  torch::nn::Linear linear(3, 1);
  const auto input = torch::ones({2, 3});
  volt::AutocastGuard autocast(torch::kCPU, torch::kBFloat16);
  torch::Tensor cast_without_grad;
  {
    volt::AutocastSafeNoGradGuard no_grad;
    CHECK_FALSE(torch::GradMode::is_enabled());
    cast_without_grad = at::autocast::cached_cast(torch::kBFloat16, linear->weight, torch::kCPU);
    CHECK(cast_without_grad.use_count() == 2);
  }
  CHECK(torch::GradMode::is_enabled());
  CHECK(cast_without_grad.use_count() == 1);
  linear->forward(input).sum().backward();
  REQUIRE(linear->weight.grad().defined());
  CHECK(linear->weight.grad().abs().sum().item<float>() > 0.0F);
}

TEST_CASE("AutocastGuard refuses a dtype this LibTorch cannot autocast to, changing nothing") {
  if (volt::compat::autocast_dtype_supported(torch::kCPU, torch::kHalf)) {
    volt::AutocastGuard autocast(torch::kCPU, torch::kHalf);
    const auto input = torch::randn({2, 2});
    CHECK((torch::mm(input, input).scalar_type() == torch::kHalf));
  } else {
    VOLT_CHECK_THROWS_CONTAINS(volt::AutocastGuard(torch::kCPU, torch::kHalf), std::runtime_error,
                               "cannot autocast to Half on device type CPU");
    CHECK_FALSE(volt::compat::autocast_enabled(torch::kCPU));
  }
  if (!volt::compat::autocast_available(torch::kMPS)) {
    VOLT_CHECK_THROWS_CONTAINS(volt::AutocastGuard(torch::kMPS, torch::kHalf), std::runtime_error,
                               "cannot autocast");
  }
}

TEST_CASE("DefaultDtypeGuard sets the default dtype for its scope") {
  {
    volt::DefaultDtypeGuard dtype(torch::kDouble);
    CHECK((torch::ones({2}).scalar_type() == torch::kDouble));
    {
      volt::DefaultDtypeGuard inner(torch::kBFloat16);
      CHECK((torch::ones({2}).scalar_type() == torch::kBFloat16));
    }
    CHECK((torch::ones({2}).scalar_type() == torch::kDouble));
  }
  CHECK((torch::ones({2}).scalar_type() == torch::kFloat));
  VOLT_CHECK_THROWS_CONTAINS(volt::DefaultDtypeGuard(torch::kLong), std::invalid_argument, "floating dtype");
}

TEST_CASE("NoOpGuard is empty") {
  static_assert(std::is_empty_v<volt::NoOpGuard>);
  static_assert(!std::is_copy_constructible_v<volt::NoOpGuard>);
  static_assert(!std::is_copy_constructible_v<volt::AutocastGuard>);
  static_assert(!std::is_move_constructible_v<volt::DefaultDtypeGuard>);
  auto scope = volt::FP32{}.forward_context();
}

TEST_CASE("GPU: fp16 and bf16 autocast output dtypes on CUDA") {
  if (!cuda_here("fp16 and bf16 autocast output dtypes on CUDA")) return;
  torch::nn::Linear linear(8, 4);
  linear->to(torch::kCUDA);
  const auto input = torch::randn({3, 8}, torch::kCUDA);
  for (const auto dtype : {torch::kHalf, torch::kBFloat16}) {
    CAPTURE(dtype);
    volt::AutocastGuard autocast(torch::kCUDA, dtype);
    const auto output = linear->forward(input);
    CHECK((output.scalar_type() == dtype));
    CHECK((torch::matmul(input, input.t()).scalar_type() == dtype));
    CHECK((input.sum().scalar_type() == torch::kFloat));
    // CUDA autocast runs softmax in fp32 whatever the input.
    CHECK((output.softmax(1).scalar_type() == torch::kFloat));
    CHECK((torch::mse_loss(output, torch::zeros_like(output)).scalar_type() == torch::kFloat));
  }
  CHECK_FALSE(volt::compat::autocast_enabled(torch::kCUDA));
  CHECK((linear->forward(input).scalar_type() == torch::kFloat));
}

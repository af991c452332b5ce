// volt::nn::Linear::forward_gelu: gelu(linear(x)) with the activation's and the bias's gradients from one node (one
// kernel on CUDA): equal to torch::gelu(torch::linear(...)) bit for bit on the CPU, gradients included; on CUDA the
// same forward, the activation's gradient within a rounding of LibTorch's GeluBackward, the bias gradient no less
// accurate than LibTorch's against float64, the same bits from run to run, double backward and CUDA-graph replay.
#include <torch/torch.h>

#include <doctest/doctest.h>

#include "nn_test_common.hpp"
#include "test_common.hpp"

#include <volt/volt.hpp>

#include <string>
#include <vector>

using volt_test::cuda_here;
using volt_test::relative;

namespace {

struct GeluResult {
  torch::Tensor y, dx, dweight, dbias;
};

// y = forward(x) and the gradients of x, the weight and the bias for y.backward(dy).
template <typename Forward>
GeluResult run_gelu(volt::nn::Linear& layer, const torch::Tensor& x, const torch::Tensor& dy, Forward forward) {
  auto xi = x.detach().clone().requires_grad_(true);
  layer->zero_grad();
  auto y = forward(xi);
  y.backward(dy);
  return {y.detach(), xi.grad(), layer->weight.grad().clone(), layer->bias.grad().clone()};
}

GeluResult fused(volt::nn::Linear& layer, const torch::Tensor& x, const torch::Tensor& dy, const char* approximate) {
  return run_gelu(layer, x, dy, [&](const torch::Tensor& xi) { return layer->forward_gelu(xi, approximate); });
}

GeluResult unfused(volt::nn::Linear& layer, const torch::Tensor& x, const torch::Tensor& dy, const char* approximate) {
  return run_gelu(layer, x, dy, [&](const torch::Tensor& xi) {
    return torch::gelu(torch::linear(xi, layer->weight, layer->bias), approximate);
  });
}

// Through the node itself (detail::linear_gelu_with_node), on any device.
GeluResult node(volt::nn::Linear& layer, const torch::Tensor& x, const torch::Tensor& dy, const char* approximate) {
  return run_gelu(layer, x, dy, [&](const torch::Tensor& xi) {
    return volt::nn::detail::linear_gelu_with_node(xi, layer->weight, layer->bias,
                                                   std::string(approximate) == "tanh");
  });
}

}  // namespace

TEST_CASE("Linear::forward_gelu equals gelu(linear(x)) bit for bit on the CPU, gradients included") {
  for (const char* approximate : {"none", "tanh"}) {
    CAPTURE(approximate);
    torch::manual_seed(3);
    volt::nn::Linear layer(12, 16);
    const auto x = torch::randn({5, 7, 12});
    const auto dy = torch::randn({5, 7, 16});
    const auto theirs = unfused(layer, x, dy, approximate);
    const auto ours = fused(layer, x, dy, approximate);
    CHECK(torch::equal(ours.y, theirs.y));
    CHECK(torch::equal(ours.dx, theirs.dx));
    CHECK(torch::equal(ours.dweight, theirs.dweight));
    CHECK(torch::equal(ours.dbias, theirs.dbias));
    // The node's own CPU path (LibTorch's gelu_backward and sum): the same values.
    const auto through_node = node(layer, x, dy, approximate);
    CHECK(torch::equal(through_node.y, theirs.y));
    CHECK(torch::equal(through_node.dx, theirs.dx));
    CHECK(torch::equal(through_node.dweight, theirs.dweight));
    CHECK(torch::allclose(through_node.dbias, theirs.dbias, 1e-6, 1e-6));
  }
  // Without a bias, or with a frozen one, forward_gelu is gelu(forward(x)).
  volt::nn::Linear plain(torch::nn::LinearOptions(6, 8).bias(false));
  const auto x = torch::randn({3, 6});
  CHECK(torch::equal(plain->forward_gelu(x), torch::gelu(torch::linear(x, plain->weight))));
}

TEST_CASE("Linear::forward_gelu says what was wrong with its approximation or input") {
  volt::nn::Linear layer(4, 8);
  CHECK_THROWS_WITH_AS(layer->forward_gelu(torch::randn({2, 4}), "erf"),
                       doctest::Contains("approximate must be \"none\" or \"tanh\" (as torch::gelu), got \"erf\""),
                       c10::Error);
  CHECK_THROWS_WITH_AS(layer->forward_gelu(torch::randn({2, 5})), doctest::Contains("in_features=4"), c10::Error);
  CHECK_THROWS_WITH_AS(layer->forward_gelu(torch::Tensor()), doctest::Contains("undefined"), c10::Error);
  // The kernel's conditions, as the node reads them: CPU tensors are not for it.
  CHECK(volt::nn::detail::gelu_bias_unfusable(torch::ones({4, 8}), torch::ones({4, 8}), false) != "");
}

#if defined(VOLT_DETAIL_HAS_RUNTIME_KERNELS)
TEST_CASE("the GELU-and-bias backward kernel compiles with NVRTC for every type and approximation (no GPU needed)") {
  if (!volt_test::nvrtc_here()) return;
  for (int type = 0; type < 3; ++type) {
    for (const bool tanh : {false, true}) {
      std::string error;
      const auto cubin = volt::nn::detail::nvrtc_compile(
          volt::nn::detail::gelu_bias_source(volt::nn::detail::GeluBiasVariant{type, tanh}), "gelu_bias", 90, &error);
      CAPTURE(type);
      CAPTURE(tanh);
      CHECK_MESSAGE(!cubin.empty(), error);
    }
  }
}

TEST_CASE("GPU: Linear::forward_gelu's kernel against LibTorch's GeluBackward and sum, and float64") {
  if (!cuda_here("Linear::forward_gelu on CUDA")) return;
  struct Case {
    std::vector<std::int64_t> input;
    std::int64_t out;
    torch::ScalarType type;
  };
  // The GPT's fc1 (bfloat16), odd row counts, every type; rows of 10 float32 or 12 bfloat16 values are not whole
  // 16-byte pieces (LibTorch's ops).
  const std::vector<Case> cases = {{{16, 256, 384}, 1536, torch::kBFloat16},
                                   {{4096, 384}, 1536, torch::kFloat},
                                   {{7, 33, 96}, 512, torch::kHalf},
                                   {{3, 5, 8}, 4, torch::kFloat},
                                   {{100, 20}, 10, torch::kFloat},
                                   {{9, 40}, 12, torch::kBFloat16}};
  for (const char* approximate : {"none", "tanh"}) {
    for (const auto& c : cases) {
      CAPTURE(approximate);
      CAPTURE(c.out);
      CAPTURE(static_cast<int>(c.type));
      torch::manual_seed(11);
      volt::nn::Linear layer(c.input.back(), c.out);
      layer->to(torch::kCUDA, c.type);
      auto out_shape = c.input;
      out_shape.back() = c.out;
      const auto x = torch::randn(c.input, torch::kCUDA).to(c.type);
      const auto dy = torch::randn(out_shape, torch::kCUDA).to(c.type);
      const auto ours = fused(layer, x, dy, approximate);
      const auto theirs = unfused(layer, x, dy, approximate);
      CHECK(torch::equal(ours.y, theirs.y));  // the same matmul and LibTorch's GELU forward
      // The activation's gradient, directly: within one rounding of the type of LibTorch's.
      const auto z = torch::linear(x, layer->weight, layer->bias).detach().reshape({-1, c.out}).contiguous();
      const auto dh = dy.reshape({-1, c.out}).contiguous();
      const auto reference_dz = torch::gelu_backward(dh, z, approximate);
      const double ulp = c.type == torch::kFloat ? 2e-6 : (c.type == torch::kBFloat16 ? 8e-3 : 1e-3);
      if (volt::nn::detail::gelu_bias_unfusable(dh, z, std::string(approximate) == "tanh").empty()) {
        const auto [dz, dbias] =
            volt::nn::detail::gelu_bias_backward(dh, z, std::string(approximate) == "tanh", c.type);
        // Each value within a rounding of LibTorch's, or, where the slope is near its zero (z about -0.75) and
        // cancels, within the slope's float32 error times dh.
        const auto differ = (dz.to(torch::kDouble) - reference_dz.to(torch::kDouble)).abs();
        const auto allowed = (reference_dz.to(torch::kDouble).abs() + dh.to(torch::kDouble).abs()) * ulp;
        CHECK(differ.le(allowed).all().item<bool>());
        MESSAGE(c.input.front() << "x..x" << c.input.back() << " -> " << c.out << " "
                                << std::string(c10::toString(c.type)) << " " << std::string(approximate)
                                << ": activation gradient equal to LibTorch's in "
                                << dz.eq(reference_dz).to(torch::kDouble).mean().item<double>() * 100
                                << "% of values");
        CHECK(dbias.sizes() == torch::IntArrayRef{c.out});
      } else {
        // Only the cases meant for LibTorch's ops fall back.
        CHECK(c.out * static_cast<std::int64_t>(c10::elementSize(c.type)) % 16 != 0);
      }
      CHECK(relative(ours.dx, theirs.dx) < 4 * ulp);
      CHECK(relative(ours.dweight, theirs.dweight) < 4 * ulp);
      // The bias gradient against float64 of LibTorch's activation gradient: no worse than LibTorch's own sum.
      const auto truth = reference_dz.to(torch::kDouble).sum(0);
      const double ours_error = relative(ours.dbias, truth), theirs_error = relative(theirs.dbias, truth);
      CHECK((ours.dbias.scalar_type() == c.type));
      CHECK(ours_error <= 2 * theirs_error + (c.type == torch::kFloat ? 1e-6 : 1e-3));
      // The same bits again (no atomics).
      const auto again = fused(layer, x, dy, approximate);
      CHECK(torch::equal(again.dbias, ours.dbias));
      CHECK(torch::equal(again.dx, ours.dx));
    }
  }
  // Under BF16 autocast on float32 parameters: bfloat16 activations, a float32 bias gradient, LibTorch's results
  // within the type's rounding.
  torch::manual_seed(12);
  volt::nn::Linear layer(384, 1536);
  layer->to(torch::kCUDA);
  const auto x = torch::randn({2048, 384}, torch::kCUDA);
  const auto dy = torch::randn({2048, 1536}, torch::kCUDA).to(torch::kBFloat16);
  const auto ours = volt_test::under_cuda_autocast(torch::kBFloat16, [&] { return fused(layer, x, dy, "none"); });
  const auto theirs = volt_test::under_cuda_autocast(torch::kBFloat16, [&] { return unfused(layer, x, dy, "none"); });
  CHECK((ours.y.scalar_type() == torch::kBFloat16));
  CHECK(torch::equal(ours.y, theirs.y));
  CHECK((ours.dbias.scalar_type() == torch::kFloat));
  // LibTorch rounds the bias gradient to bfloat16 before autocast casts it back to float32; volt's is the float32
  // sum of the bfloat16 activation gradients: against float64, no worse.
  const auto z = volt_test::under_cuda_autocast(torch::kBFloat16, [&] {
    return torch::linear(x, layer->weight, layer->bias).detach();
  });
  const auto truth = torch::gelu_backward(dy, z).to(torch::kDouble).sum(0);
  MESSAGE("BF16 autocast bias gradient against float64: volt " << relative(ours.dbias, truth) << ", LibTorch "
                                                               << relative(theirs.dbias, truth));
  CHECK(relative(ours.dbias, truth) < 1e-5);
  CHECK(relative(theirs.dbias, truth) < 1e-2);
  CHECK(relative(ours.dweight, theirs.dweight) < 2e-2);
  // Double backward: LibTorch's differentiable gelu_backward and sum.
  auto second_order = [&](auto&& forward) {
    auto xi = torch::randn({6, 384}, torch::kCUDA).requires_grad_(true);
    auto grads = torch::autograd::grad({forward(xi).pow(2).sum()}, {layer->bias}, {}, true, true);
    return torch::autograd::grad({grads[0].sum()}, {xi})[0];
  };
  torch::manual_seed(13);
  const auto ours_second = second_order([&](const torch::Tensor& xi) { return layer->forward_gelu(xi); });
  torch::manual_seed(13);
  const auto theirs_second = second_order(
      [&](const torch::Tensor& xi) { return torch::gelu(torch::linear(xi, layer->weight, layer->bias)); });
  CHECK(relative(ours_second, theirs_second) < 1e-5);
#if VOLT_DETAIL_HAS_CUDA_GRAPHS
  // Inside a captured CUDA graph: replay equals the eager steps.
  auto xg = torch::randn({512, 384}, torch::kCUDA);
  const auto dyg = torch::randn({512, 1536}, torch::kCUDA);
  volt_test::check_graph_replay([&] {
    layer->zero_grad();
    layer->forward_gelu(xg).backward(dyg);
    return std::vector<torch::Tensor>{layer->bias.grad().clone(), layer->weight.grad().clone()};
  });
#endif
}
#endif

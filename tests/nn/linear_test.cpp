// volt::nn::Linear: torch::nn::Linear's parameters under its names and drawn from the same random numbers, results
// equal to torch::nn::Linear on 2-D inputs and to a float64 reference on inputs of any rank, clear errors, and on
// CUDA under autocast the result of one bias-fused matmul (no worse than LibTorch's matmul-then-add).
#include <torch/torch.h>

#include <doctest/doctest.h>

#include "nn_test_common.hpp"
#include "test_common.hpp"

#include <volt/volt.hpp>

#include <sstream>
#include <string>
#include <vector>

using volt_test::cuda_here;
using volt_test::relative;

namespace {

struct Result {
  torch::Tensor y, dx, dweight, dbias;
};

template <typename Module, typename Forward>
Result run_with(Module& module, const torch::Tensor& x, const torch::Tensor& dy, Forward forward) {
  auto xi = x.detach().clone().requires_grad_(true);
  module->zero_grad();
  auto y = forward(xi);
  y.backward(dy);
  return {y.detach(), xi.grad(), module->weight.grad().clone(),
          module->bias.defined() ? module->bias.grad().clone() : torch::Tensor()};
}

template <typename Module>
Result run(Module& module, const torch::Tensor& x, const torch::Tensor& dy) {
  return run_with(module, x, dy, [&](const torch::Tensor& xi) { return module(xi); });
}

// The same through volt::nn::detail::linear_with_bias_node (the bias gradient from its own node).
template <typename Module>
Result run_bias_node(Module& module, const torch::Tensor& x, const torch::Tensor& dy) {
  return run_with(module, x, dy, [&](const torch::Tensor& xi) {
    return volt::nn::detail::linear_with_bias_node(xi, module->weight, module->bias);
  });
}
}  // namespace

TEST_CASE("Linear holds torch::nn::Linear's parameters, drawn from the same random numbers") {
  for (const bool with_bias : {true, false}) {
    CAPTURE(with_bias);
    const auto options = torch::nn::LinearOptions(12, 5).bias(with_bias);
    torch::manual_seed(42);
    torch::nn::Linear reference(options);
    const auto next_after_theirs = torch::rand({3});
    torch::manual_seed(42);
    volt::nn::Linear ours(options);
    const auto next_after_ours = torch::rand({3});
    const auto theirs = reference->named_parameters();
    const auto mine = ours->named_parameters();
    REQUIRE(mine.size() == theirs.size());
    for (std::size_t i = 0; i < mine.size(); ++i) {
      CHECK(mine[i].key() == theirs[i].key());
      CHECK(torch::equal(mine[i].value(), theirs[i].value()));
      CHECK(mine[i].value().requires_grad());
    }
    CHECK(ours->bias.defined() == with_bias);
    // The random stream advanced by as much as LibTorch's module advances it.
    CHECK(torch::equal(next_after_ours, next_after_theirs));
  }
  // A state dict saved from LibTorch's module loads into volt's.
  torch::nn::Linear reference(7, 3);
  volt::nn::Linear ours(7, 3);
  std::stringstream stream;
  torch::save(reference, stream);
  torch::load(ours, stream);
  CHECK(torch::equal(ours->weight, reference->weight));
  CHECK(torch::equal(ours->bias, reference->bias));
  std::ostringstream printed;
  printed << *ours;
  CHECK(printed.str() == "volt::nn::Linear(in_features=7, out_features=3, bias=true)");
  // reset_parameters draws new values in place.
  const auto before = ours->weight.clone();
  const auto* storage = ours->weight.data_ptr();
  ours->reset_parameters();
  CHECK_FALSE(torch::equal(before, ours->weight));
  CHECK(ours->weight.data_ptr() == storage);
}

TEST_CASE("Linear equals torch::nn::Linear on 2-D inputs and a float64 reference at any rank, on the CPU") {
  torch::manual_seed(1);
  volt::nn::Linear ours(16, 8);
  torch::nn::Linear reference(16, 8);
  {
    torch::NoGradGuard no_grad;
    reference->weight.copy_(ours->weight);
    reference->bias.copy_(ours->bias);
  }
  const auto x2 = torch::randn({10, 16});
  const auto dy2 = torch::randn({10, 8});
  const auto a = run(ours, x2, dy2);
  const auto b = run(reference, x2, dy2);
  CHECK(torch::equal(a.y, b.y));
  CHECK(torch::equal(a.dx, b.dx));
  CHECK(torch::equal(a.dweight, b.dweight));
  CHECK(torch::equal(a.dbias, b.dbias));
  for (const auto& shape : std::vector<std::vector<std::int64_t>>{{4, 6, 16}, {2, 3, 5, 16}, {16}}) {
    CAPTURE(torch::IntArrayRef(shape));
    const auto x = torch::randn(shape);
    auto out_shape = shape;
    out_shape.back() = 8;
    const auto dy = torch::randn(out_shape);
    const auto mine = run(ours, x, dy);
    const auto theirs = run(reference, x, dy);
    CHECK(mine.y.sizes() == theirs.y.sizes());
    // The float64 reference of the same inputs.
    torch::nn::Linear exact(16, 8);
    exact->to(torch::kDouble);
    {
      torch::NoGradGuard no_grad;
      exact->weight.copy_(ours->weight);
      exact->bias.copy_(ours->bias);
    }
    const auto truth = run(exact, x.to(torch::kDouble), dy.to(torch::kDouble));
    CHECK(relative(mine.y, truth.y) < 1e-6);
    CHECK(relative(mine.dx, truth.dx) < 1e-6);
    CHECK(relative(mine.dweight, truth.dweight) < 1e-6);
    CHECK(relative(mine.dbias, truth.dbias) < 1e-6);
    CHECK(relative(mine.y, theirs.y) < 1e-6);
  }
}

TEST_CASE("Linear says what was wrong with its options or input, and clones deeply") {
  volt::nn::Linear fc(4, 2);
  try {
    fc(torch::randn({3, 5}));
    FAIL("a wrong last dimension was accepted");
  } catch (const c10::Error& error) {
    const std::string message = error.what_without_backtrace();
    CHECK(message.find("in_features=4") != std::string::npos);
    CHECK(message.find("[3, 5]") != std::string::npos);
  }
  CHECK_THROWS_WITH_AS(fc(torch::Tensor()), doctest::Contains("undefined"), c10::Error);
  CHECK_THROWS_WITH_AS(volt::nn::Linear(0, 3), doctest::Contains("must be positive"), c10::Error);
  auto copy = std::dynamic_pointer_cast<volt::nn::LinearImpl>(fc->clone());
  REQUIRE(copy);
  CHECK(torch::equal(copy->weight, fc->weight));
  {
    torch::NoGradGuard no_grad;
    copy->weight.zero_();
  }
  CHECK_FALSE(torch::equal(copy->weight, fc->weight));
}

TEST_CASE("GPU: Linear under CUDA autocast runs one bias-fused matmul, no less accurate than LibTorch's") {
  if (!cuda_here("Linear on CUDA")) return;
  torch::manual_seed(2);
  volt::nn::Linear ours(384, 1536);
  torch::nn::Linear reference(384, 1536);
  {
    torch::NoGradGuard no_grad;
    reference->weight.copy_(ours->weight);
    reference->bias.normal_(0, 1);  // a bias large enough to matter
    ours->bias.copy_(reference->bias);
  }
  ours->to(torch::kCUDA);
  reference->to(torch::kCUDA);
  const auto x = torch::randn({8, 256, 384}, torch::kCUDA);
  const auto dy = torch::randn({8, 256, 1536}, torch::kCUDA).to(torch::kBFloat16);
  auto under_autocast = [&](auto& module) {
    return volt_test::under_cuda_autocast(torch::kBFloat16, [&] { return run(module, x, dy); });
  };
  const auto mine = under_autocast(ours);
  const auto theirs = under_autocast(reference);
  CHECK((mine.y.scalar_type() == torch::kBFloat16));
  CHECK((mine.dweight.scalar_type() == torch::kFloat));
  CHECK((mine.dx.scalar_type() == torch::kFloat));
  // The float64 reference of the bfloat16-rounded operands (what both compute from).
  const auto xr = x.to(torch::kBFloat16).to(torch::kDouble);
  const auto wr = ours->weight.to(torch::kBFloat16).to(torch::kDouble);
  const auto br = ours->bias.to(torch::kBFloat16).to(torch::kDouble);
  const auto truth = torch::matmul(xr, wr.t()) + br;
  const double mine_error = relative(mine.y, truth), theirs_error = relative(theirs.y, truth);
  MESSAGE("relative error of y against float64: volt::nn::Linear " << mine_error << ", torch::nn::Linear "
                                                                    << theirs_error);
  CHECK(mine_error < 1e-2);
  CHECK(mine_error <= theirs_error * 1.05);
  CHECK(relative(mine.dx, theirs.dx) < 1e-2);
  CHECK(relative(mine.dweight, theirs.dweight) < 1e-2);
  CHECK(relative(mine.dbias, theirs.dbias) < 1e-2);
}

TEST_CASE("the bias-gradient node passes the matmul's gradients through and sums the bias's (CPU: LibTorch's sum)") {
  torch::manual_seed(8);
  volt::nn::Linear layer(12, 8);
  const auto x = torch::randn({5, 7, 12});
  const auto dy = torch::randn({5, 7, 8});
  const auto theirs = run(layer, x, dy);
  const auto mine = run_bias_node(layer, x, dy);
  CHECK(torch::equal(mine.y, theirs.y));
  CHECK(torch::equal(mine.dx, theirs.dx));
  CHECK(torch::equal(mine.dweight, theirs.dweight));
  CHECK(torch::allclose(mine.dbias, theirs.dbias, 1e-6, 1e-6));
  CHECK(mine.dbias.sizes() == layer->bias.sizes());
}

TEST_CASE("GPU: the bias-gradient node's column-sum kernel against float64 and LibTorch's sum") {
  if (!cuda_here("Linear's bias gradient on CUDA")) return;
  struct Case {
    std::vector<std::int64_t> input;
    std::int64_t out;
    torch::ScalarType type;
  };
  // Columns a multiple of 4 (the kernel) and not (LibTorch's sum), 2-D and 3-D inputs, every float type.
  const std::vector<Case> cases = {{{64, 256, 384}, 1152, torch::kFloat},
                                   {{16384, 384}, 384, torch::kBFloat16},
                                   {{7, 33, 96}, 1536, torch::kHalf},
                                   {{100, 20}, 10, torch::kFloat},
                                   {{3, 5, 8}, 4, torch::kFloat}};
  for (const auto& c : cases) {
    CAPTURE(c.out);
    CAPTURE(static_cast<int>(c.type));
    torch::manual_seed(4);
    const auto in = c.input.back();
    volt::nn::Linear ours(in, c.out);
    torch::nn::Linear reference(in, c.out);
    {
      torch::NoGradGuard no_grad;
      reference->weight.copy_(ours->weight);
      reference->bias.copy_(ours->bias);
    }
    ours->to(torch::kCUDA, c.type);
    reference->to(torch::kCUDA, c.type);
    auto out_shape = c.input;
    out_shape.back() = c.out;
    const auto x = torch::randn(c.input, torch::kCUDA).to(c.type);
    const auto dy = (torch::randn(out_shape, torch::kCUDA) + 0.25).to(c.type);
    const auto mine = run_bias_node(ours, x, dy);
    // ATen's linear with LibTorch's own bias gradient (torch::nn::Linear adds a 3-D input's bias in a kernel of its
    // own, which rounds a half or bfloat16 output twice).
    const auto theirs = run_with(reference, x, dy, [&](const torch::Tensor& xi) {
      return torch::linear(xi, reference->weight, reference->bias);
    });
    CHECK((mine.dbias.scalar_type() == c.type));
    CHECK(torch::equal(mine.y, theirs.y));  // the same matmul forward
    CHECK(torch::equal(mine.dx, theirs.dx));
    CHECK(torch::equal(mine.dweight, theirs.dweight));
    const auto truth = dy.to(torch::kDouble).reshape({-1, c.out}).sum(0);
    const double mine_error = relative(mine.dbias, truth), theirs_error = relative(theirs.dbias, truth);
    MESSAGE(c.input.front() << "x..x" << in << " -> " << c.out << " " << std::string(c10::toString(c.type))
                            << ": bias gradient relative error, volt " << mine_error << ", LibTorch "
                            << theirs_error);
    CHECK(mine_error <= 2 * theirs_error + (c.type == torch::kFloat ? 1e-6 : 1e-3));
    // The same bits again (no atomics).
    const auto again = run_bias_node(ours, x, dy);
    CHECK(torch::equal(again.dbias, mine.dbias));
  }
  // Under BF16 autocast the bias gradient is summed in float32 and not rounded to bfloat16 on the way, where the
  // kernel applies (columns a multiple of 4).
  volt::nn::Linear layer(384, 1536);
  layer->to(torch::kCUDA);
  const auto x = torch::randn({4096, 384}, torch::kCUDA);
  const auto dy = (torch::randn({4096, 1536}, torch::kCUDA) + 1).to(torch::kBFloat16);
  const auto result =
      volt_test::under_cuda_autocast(torch::kBFloat16, [&] { return run_bias_node(layer, x, dy); });
  const auto truth = dy.to(torch::kDouble).sum(0);
  CHECK((result.dbias.scalar_type() == torch::kFloat));
  CHECK(relative(result.dbias, truth) < 1e-6);
  // Double backward: a differentiable sum. (In a scope: a graph kept alive keeps the parameters' AccumulateGrad
  // nodes, made on the default stream, and a capture on another stream then cannot wait for them.)
  {
    auto xi = torch::randn({6, 384}, torch::kCUDA).requires_grad_(true);
    auto out = volt::nn::detail::linear_with_bias_node(xi, layer->weight, layer->bias);
    auto grads = torch::autograd::grad({out.pow(2).sum()}, {layer->bias}, {}, true, true);
    auto second = torch::autograd::grad({grads[0].sum()}, {xi});
    CHECK(relative(second[0], 2 * torch::matmul(torch::ones({6, 1536}, torch::kCUDA), layer->weight)) < 1e-5);
  }
  // Linear::forward on CUDA takes the node: the same gradients as run_bias_node, bit for bit.
  const auto through_forward = run(layer, x, dy.to(torch::kFloat));
  const auto through_node = run_bias_node(layer, x, dy.to(torch::kFloat));
  CHECK(torch::equal(through_forward.dbias, through_node.dbias));
  CHECK(torch::equal(through_forward.dweight, through_node.dweight));
#if VOLT_DETAIL_HAS_CUDA_GRAPHS
  // Inside a captured CUDA graph: replay equals the eager steps.
  auto xg = torch::randn({512, 384}, torch::kCUDA);
  const auto dyg = torch::randn({512, 1536}, torch::kCUDA);
  volt_test::check_graph_replay([&] {
    layer->zero_grad();
    layer(xg).backward(dyg);
    return std::vector<torch::Tensor>{layer->bias.grad().clone(), layer->weight.grad().clone()};
  });
#endif
}

#if defined(VOLT_DETAIL_HAS_RUNTIME_KERNELS)
TEST_CASE("GPU: column_total adds float32 partial sums per column as LibTorch's sum does, in any result type") {
  if (!cuda_here("column_total")) return;
  torch::manual_seed(6);
  // The partials' shapes of the GPT's bias gradients (176 x 384) and layer norms (528 x 768), and odd ones.
  for (const auto& shape : std::vector<std::vector<std::int64_t>>{{176, 384}, {528, 768}, {1, 10}, {5, 7}, {97, 33}}) {
    CAPTURE(torch::IntArrayRef(shape));
    const auto partial = torch::randn(shape, torch::kCUDA) + 0.5;
    const auto truth = partial.to(torch::kDouble).sum(0);
    for (const auto type : {torch::kFloat, torch::kBFloat16, torch::kHalf}) {
      CAPTURE(static_cast<int>(type));
      const auto ours = volt::nn::detail::column_total(partial, type);
      CHECK((ours.scalar_type() == type));
      CHECK(ours.sizes() == torch::IntArrayRef{shape[1]});
      const double tolerance = type == torch::kFloat ? 1e-6 : (type == torch::kBFloat16 ? 8e-3 : 1e-3);
      CHECK(relative(ours, truth) < tolerance);
      CHECK(relative(ours, partial.sum(0).to(type)) < tolerance);
      CHECK(torch::equal(volt::nn::detail::column_total(partial, type), ours));  // the same bits again
    }
  }
  // Empty partials: zeros, or nothing.
  CHECK(torch::equal(volt::nn::detail::column_total(torch::empty({0, 3}, torch::kCUDA), torch::kFloat),
                     torch::zeros({3}, torch::kCUDA)));
  CHECK(volt::nn::detail::column_total(torch::empty({3, 0}, torch::kCUDA), torch::kHalf).numel() == 0);
  CHECK_THROWS_WITH_AS(volt::nn::detail::column_total(torch::ones({4}, torch::kCUDA), torch::kFloat),
                       doctest::Contains("(rows, columns)"), c10::Error);
}

TEST_CASE("the column-sum kernel compiles with NVRTC for every type (no GPU needed)") {
  if (!volt_test::nvrtc_here()) return;
  for (int type = 0; type < 3; ++type) {
    for (int out_type = 0; out_type < 3; ++out_type) {
      std::string error;
      const auto cubin = volt::nn::detail::nvrtc_compile(
          volt::nn::detail::column_sum_source(volt::nn::detail::ColumnSumVariant{type, out_type}), "column_sum", 90,
          &error);
      CAPTURE(type);
      CAPTURE(out_type);
      CHECK_MESSAGE(!cubin.empty(), error);
    }
  }
}
#endif

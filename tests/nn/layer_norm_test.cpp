// volt::nn::LayerNorm: torch::nn::LayerNorm's parameters under its names, results equal to it bit for bit on the
// CPU (and wherever the fused kernels do not apply), clear errors; the fused kernels' sources compile with NVRTC for
// every type combination (no GPU needed); and on CUDA the fused kernels against a float64 reference next to
// LibTorch's own error, under autocast, with double backward, run to run and inside a captured CUDA graph.
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

// Random weight and bias (so that both matter), the same in both modules.
template <typename A, typename B>
void same_random_affine(A& a, B& b, std::uint64_t seed) {
  torch::manual_seed(seed);
  torch::NoGradGuard no_grad;
  a->weight.uniform_(0.5, 1.5);
  a->bias.normal_(0.0, 0.2);
  b->weight.copy_(a->weight);
  b->bias.copy_(a->bias);
}

struct NormResult {
  torch::Tensor y, dx, dweight, dbias;
};

// y = forward(x) and the gradients of x, weight and bias for the output gradient dy, from a fresh leaf of x.
template <typename Forward>
NormResult run_norm(const torch::Tensor& x, const torch::Tensor& dy, const torch::Tensor& weight, const torch::Tensor& bias,
           Forward forward) {
  auto xi = x.detach().clone().requires_grad_(true);
  for (const auto* p : {&weight, &bias}) {
    if (p->defined() && p->grad().defined()) p->mutable_grad() = torch::Tensor();
  }
  auto y = forward(xi);
  y.backward(dy);
  auto grad_of = [](const torch::Tensor& t) {
    return t.defined() && t.grad().defined() ? t.grad().clone() : torch::Tensor();
  };
  return {y.detach(), xi.grad(), grad_of(weight), grad_of(bias)};
}

}  // namespace

TEST_CASE("LayerNorm holds torch::nn::LayerNorm's parameters under its names, initialised alike") {
  torch::nn::LayerNorm reference(torch::nn::LayerNormOptions({4, 6}).eps(1e-3));
  volt::nn::LayerNorm ln(torch::nn::LayerNormOptions({4, 6}).eps(1e-3));
  const auto ours = ln->named_parameters();
  const auto theirs = reference->named_parameters();
  REQUIRE(ours.size() == 2);
  CHECK(ours[0].key() == "weight");
  CHECK(ours[1].key() == "bias");
  CHECK(theirs.size() == ours.size());
  CHECK(torch::equal(ln->weight, reference->weight));
  CHECK(torch::equal(ln->bias, reference->bias));
  CHECK(ln->weight.sizes() == torch::IntArrayRef({4, 6}));
  CHECK(ln->named_buffers().size() == reference->named_buffers().size());

  volt::nn::LayerNorm plain(torch::nn::LayerNormOptions({8}).elementwise_affine(false));
  CHECK(plain->parameters().empty());
  CHECK_FALSE(plain->weight.defined());

  // A state dict saved from LibTorch's module loads into volt's and back, unchanged.
  same_random_affine(reference, reference, 3);
  std::stringstream stream;
  torch::save(reference, stream);
  torch::load(ln, stream);
  CHECK(torch::equal(ln->weight, reference->weight));
  CHECK(torch::equal(ln->bias, reference->bias));

  std::ostringstream printed;
  printed << *ln;
  CHECK(printed.str() == "volt::nn::LayerNorm([4, 6], eps=0.001, elementwise_affine=true)");
  std::ostringstream printed_cast;
  printed_cast << *volt::nn::LayerNorm(torch::nn::LayerNormOptions({8}), /*autocast_output=*/true);
  CHECK(printed_cast.str() == "volt::nn::LayerNorm([8], eps=1e-05, elementwise_affine=true, autocast_output=true)");
}

TEST_CASE("LayerNorm equals torch::nn::LayerNorm bit for bit on the CPU, gradients included") {
  struct Case {
    std::vector<std::int64_t> input, normalized;
    bool affine;
    torch::ScalarType dtype;
  };
  const std::vector<Case> cases = {{{16, 32}, {32}, true, torch::kFloat},
                                   {{4, 7, 12}, {12}, true, torch::kDouble},
                                   {{3, 5, 4, 6}, {4, 6}, true, torch::kFloat},
                                   {{8, 10}, {10}, false, torch::kFloat}};
  for (const auto& c : cases) {
    CAPTURE(torch::IntArrayRef(c.input));
    auto options = torch::nn::LayerNormOptions(c.normalized).elementwise_affine(c.affine).eps(1e-4);
    torch::nn::LayerNorm reference(options);
    volt::nn::LayerNorm ln(options);
    reference->to(c.dtype);
    ln->to(c.dtype);
    if (c.affine) same_random_affine(reference, ln, 11);
    torch::manual_seed(5);
    const auto x = torch::randn(c.input, torch::TensorOptions().dtype(c.dtype)) * 3 + 1;
    const auto dy = torch::randn(c.input, torch::TensorOptions().dtype(c.dtype));
    CHECK_FALSE(ln->fuses(x));
    const auto ours = run_norm(x, dy, ln->weight, ln->bias, [&](const torch::Tensor& xi) { return ln(xi); });
    const auto theirs =
        run_norm(x, dy, reference->weight, reference->bias, [&](const torch::Tensor& xi) { return reference(xi); });
    CHECK(torch::equal(ours.y, theirs.y));
    CHECK(torch::equal(ours.dx, theirs.dx));
    if (c.affine) {
      CHECK(torch::equal(ours.dweight, theirs.dweight));
      CHECK(torch::equal(ours.dbias, theirs.dbias));
    }
  }
}

TEST_CASE("LayerNorm under CPU autocast: LibTorch's output type, or autocast's with autocast_output") {
  if (!volt::compat::autocast_dtype_supported(c10::DeviceType::CPU, torch::kBFloat16)) {
    MESSAGE("skipped: this LibTorch has no bfloat16 CPU autocast");
    return;
  }
  torch::nn::LayerNorm reference(torch::nn::LayerNormOptions({16}));
  volt::nn::LayerNorm ln(torch::nn::LayerNormOptions({16}));
  volt::nn::LayerNorm cast(torch::nn::LayerNormOptions({16}), /*autocast_output=*/true);
  same_random_affine(reference, ln, 2);
  same_random_affine(reference, cast, 2);
  torch::manual_seed(9);
  const auto x = torch::randn({6, 16});
  torch::Tensor theirs, ours, cast_out;
  {
    volt::compat::set_autocast_dtype(c10::DeviceType::CPU, torch::kBFloat16);
    volt::compat::set_autocast_enabled(c10::DeviceType::CPU, true);
    theirs = reference(x);
    ours = ln(x);
    cast_out = cast(x);
    volt::compat::set_autocast_enabled(c10::DeviceType::CPU, false);
    volt::compat::autocast_clear_cache();
  }
  CHECK((ours.scalar_type() == theirs.scalar_type()));
  CHECK(torch::equal(ours, theirs));
  CHECK((cast_out.scalar_type() == torch::kBFloat16));
  CHECK(torch::equal(cast_out, theirs.to(torch::kBFloat16)));
  // Outside autocast the option changes nothing.
  CHECK((cast(x).scalar_type() == torch::kFloat));
}

TEST_CASE("LayerNorm says what was wrong with its options or input, and clones deeply") {
  volt::nn::LayerNorm ln(torch::nn::LayerNormOptions({8}));
  try {
    ln(torch::randn({4, 6}));
    FAIL("a wrong last dimension was accepted");
  } catch (const c10::Error& error) {
    const std::string message = error.what_without_backtrace();
    CHECK(message.find("normalized_shape=[8]") != std::string::npos);
    CHECK(message.find("[4, 6]") != std::string::npos);
  }
  CHECK_THROWS_WITH_AS(ln(torch::Tensor()), doctest::Contains("undefined"), c10::Error);
  CHECK_THROWS_WITH_AS(volt::nn::LayerNorm(std::vector<std::int64_t>{}), doctest::Contains("normalized_shape is empty"),
                       c10::Error);
  CHECK_THROWS_WITH_AS(volt::nn::LayerNorm(std::vector<std::int64_t>{4, 0}), doctest::Contains("not positive"),
                       c10::Error);
  CHECK(ln->why_not_fused(torch::randn({4, 6})).find("differ from normalized_shape") != std::string::npos);
  CHECK_FALSE(ln->why_not_fused(torch::randn({4, 8})).empty());

  auto copy = std::dynamic_pointer_cast<volt::nn::LayerNormImpl>(ln->clone());
  REQUIRE(copy);
  {
    torch::NoGradGuard no_grad;
    copy->weight.fill_(2);
  }
  CHECK(ln->weight.eq(1).all().item<bool>());
  CHECK(copy->named_parameters()["weight"].eq(2).all().item<bool>());
}

#if defined(VOLT_DETAIL_HAS_RUNTIME_KERNELS)
TEST_CASE("the fused layer norm's kernels compile with NVRTC for every type combination (no GPU needed)") {
  if (!volt_test::nvrtc_here()) return;
  int compiled = 0;
  for (const std::int64_t n : {4, 384, 1000, 1024}) {
    for (int x = 0; x < 3; ++x) {
      for (int y = 0; y < 3; ++y) {
        for (int affine = 0; affine < 2; ++affine) {
          volt::nn::detail::LayerNormVariant variant;
          variant.n = n;
          variant.x_type = x;
          variant.y_type = y;
          variant.w_type = (x + y) % 3;
          variant.has_weight = variant.has_bias = affine == 1;
          const auto source = volt::nn::detail::layer_norm_source(variant);
          for (const int arch : {90, 80}) {
            if (arch == 80 && n != 384) continue;
            std::string error;
            const auto cubin = volt::nn::detail::nvrtc_compile(source, "layer_norm", arch, &error);
            CAPTURE(n);
            CAPTURE(arch);
            CHECK_MESSAGE(!cubin.empty(), error);
            compiled += cubin.empty() ? 0 : 1;
          }
        }
      }
    }
  }
  CHECK(compiled == 4 * 3 * 3 * 2 + 3 * 3 * 2);
  // A source with an error reports NVRTC's log, naming the kernel.
  std::string error;
  CHECK(volt::nn::detail::nvrtc_compile("__global__ void k() { undefined_thing(); }", "broken", 90, &error).empty());
  CHECK(error.find("broken") != std::string::npos);
  CHECK(error.find("undefined_thing") != std::string::npos);
}
#endif

TEST_CASE("GPU: LayerNorm's fused kernels against a float64 reference, next to LibTorch's own error") {
  if (!cuda_here("LayerNorm on CUDA")) return;
  struct Case {
    torch::ScalarType x, weight;
    std::int64_t n;
  };
  const std::vector<Case> cases = {{torch::kFloat, torch::kFloat, 384},  {torch::kBFloat16, torch::kBFloat16, 384},
                                   {torch::kHalf, torch::kHalf, 1024},   {torch::kFloat, torch::kFloat, 4},
                                   {torch::kBFloat16, torch::kFloat, 96}, {torch::kFloat, torch::kFloat, 1000}};
  for (const auto& c : cases) {
    CAPTURE(c.n);
    CAPTURE(static_cast<int>(c.x));
    const auto options = torch::nn::LayerNormOptions({c.n});
    torch::nn::LayerNorm reference(options);
    volt::nn::LayerNorm ln(options);
    same_random_affine(reference, ln, 21);
    reference->to(torch::kCUDA, c.weight);
    ln->to(torch::kCUDA, c.weight);
    torch::manual_seed(4);
    const auto x = (torch::randn({3, 700, c.n}, torch::kCUDA) * 2 + 0.5).to(c.x);
    const auto dy = torch::randn({3, 700, c.n}, torch::kCUDA).to(c.x);
#if defined(VOLT_DETAIL_HAS_RUNTIME_KERNELS)
    CHECK_MESSAGE(ln->fuses(x), ln->why_not_fused(x));
#endif
    const std::string types = std::string(c10::toString(c.x)) + ", weight " + c10::toString(c.weight);
    MESSAGE("n " << c.n << ", x " << types << ": fused " << ln->fuses(x) << " " << ln->why_not_fused(x));
    const auto ours = run_norm(x, dy, ln->weight, ln->bias, [&](const torch::Tensor& xi) { return ln(xi); });
    // The float64 reference of the same inputs and parameters.
    torch::nn::LayerNorm exact(options);
    exact->to(torch::kCUDA, torch::kDouble);
    {
      torch::NoGradGuard no_grad;
      exact->weight.copy_(ln->weight);
      exact->bias.copy_(ln->bias);
    }
    const auto truth = run_norm(x.to(torch::kDouble), dy.to(torch::kDouble), exact->weight, exact->bias,
                           [&](const torch::Tensor& xi) { return exact(xi); });
    CHECK((ours.y.scalar_type() == c.x));
    CHECK((ours.dx.scalar_type() == c.x));
    CHECK((ours.dweight.scalar_type() == c.weight));
    CHECK(ours.y.sizes() == x.sizes());
    // LibTorch's own layer norm, where it takes these types (its CUDA kernel wants one type for all).
    const bool torch_takes_it = c.x == c.weight;
    const double slack = c.x == torch::kFloat ? 1e-5 : 1e-2;
    if (torch_takes_it) {
      const auto theirs =
          run_norm(x, dy, reference->weight, reference->bias, [&](const torch::Tensor& xi) { return reference(xi); });
      const double ref_y = relative(theirs.y, truth.y), ref_dx = relative(theirs.dx, truth.dx);
      const double ref_dw = relative(theirs.dweight, truth.dweight), ref_db = relative(theirs.dbias, truth.dbias);
      MESSAGE("relative error, ours / LibTorch's: y " << relative(ours.y, truth.y) << " / " << ref_y << ", dx "
                                                       << relative(ours.dx, truth.dx) << " / " << ref_dx << ", dw "
                                                       << relative(ours.dweight, truth.dweight) << " / " << ref_dw
                                                       << ", db " << relative(ours.dbias, truth.dbias) << " / "
                                                       << ref_db);
      CHECK(relative(ours.y, truth.y) <= 2 * ref_y + slack * 0.1);
      CHECK(relative(ours.dx, truth.dx) <= 2 * ref_dx + slack * 0.1);
      CHECK(relative(ours.dweight, truth.dweight) <= 2 * ref_dw + slack * 0.1);
      CHECK(relative(ours.dbias, truth.dbias) <= 2 * ref_db + slack * 0.1);
    }
    CHECK(relative(ours.y, truth.y) < slack);
    CHECK(relative(ours.dx, truth.dx) < slack);
    CHECK(relative(ours.dweight, truth.dweight) < slack);
    CHECK(relative(ours.dbias, truth.dbias) < slack);
    // The same inputs give the same bits again (no atomics in the kernels).
    const auto again = run_norm(x, dy, ln->weight, ln->bias, [&](const torch::Tensor& xi) { return ln(xi); });
    CHECK(torch::equal(again.y, ours.y));
    CHECK(torch::equal(again.dx, ours.dx));
    CHECK(torch::equal(again.dweight, ours.dweight));
    CHECK(torch::equal(again.dbias, ours.dbias));
  }
  // Where the kernels do not apply, LibTorch's op runs (and says why).
  volt::nn::LayerNorm odd(torch::nn::LayerNormOptions({10}));
  odd->to(torch::kCUDA);
  torch::nn::LayerNorm odd_reference(torch::nn::LayerNormOptions({10}));
  odd_reference->to(torch::kCUDA);
  const auto x10 = torch::randn({5, 10}, torch::kCUDA);
  CHECK_FALSE(odd->fuses(x10));
  CHECK(odd->why_not_fused(x10).find("multiple of 4") != std::string::npos);
  CHECK(torch::equal(odd(x10), odd_reference(x10)));
  volt::nn::LayerNorm wide(torch::nn::LayerNormOptions({64}));
  wide->to(torch::kCUDA);
  const auto strided = torch::randn({64, 8}, torch::kCUDA).t();
  CHECK_FALSE(wide->fuses(strided));
  CHECK_FALSE(wide->fuses(torch::randn({8, 64}, torch::kCUDA).to(torch::kDouble)));
}

TEST_CASE("GPU: LayerNorm under CUDA autocast: float32 out as LibTorch, autocast's type with autocast_output") {
  if (!cuda_here("LayerNorm under CUDA autocast")) return;
  torch::nn::LayerNorm reference(torch::nn::LayerNormOptions({384}));
  volt::nn::LayerNorm ln(torch::nn::LayerNormOptions({384}));
  volt::nn::LayerNorm cast(torch::nn::LayerNormOptions({384}), /*autocast_output=*/true);
  same_random_affine(reference, ln, 8);
  same_random_affine(reference, cast, 8);
  reference->to(torch::kCUDA);
  ln->to(torch::kCUDA);
  cast->to(torch::kCUDA);
  torch::manual_seed(12);
  const auto x = torch::randn({64, 256, 384}, torch::kCUDA);
  const auto dy16 = torch::randn({64, 256, 384}, torch::kCUDA).to(torch::kBFloat16);
  auto under_autocast = [](auto&& body) { return volt_test::under_cuda_autocast(torch::kBFloat16, body); };
#if defined(VOLT_DETAIL_HAS_RUNTIME_KERNELS)
  under_autocast([&] {
    CHECK_MESSAGE(ln->fuses(x), ln->why_not_fused(x));
    CHECK_MESSAGE(cast->fuses(x), cast->why_not_fused(x));
    return 0;
  });
#endif
  const auto theirs = under_autocast(
      [&] { return run_norm(x, dy16.to(torch::kFloat), reference->weight, reference->bias, [&](auto& xi) {
              return reference(xi);
            }); });
  const auto ours = under_autocast(
      [&] { return run_norm(x, dy16.to(torch::kFloat), ln->weight, ln->bias, [&](auto& xi) { return ln(xi); }); });
  const auto casted =
      under_autocast([&] { return run_norm(x, dy16, cast->weight, cast->bias, [&](auto& xi) { return cast(xi); }); });
  CHECK((theirs.y.scalar_type() == torch::kFloat));
  CHECK((ours.y.scalar_type() == torch::kFloat));
  CHECK((casted.y.scalar_type() == torch::kBFloat16));
  CHECK((casted.dx.scalar_type() == torch::kFloat));
  CHECK(relative(ours.y, theirs.y) < 1e-5);
  CHECK(relative(ours.dx, theirs.dx) < 1e-5);
  CHECK(relative(ours.dweight, theirs.dweight) < 1e-5);
  CHECK(relative(ours.dbias, theirs.dbias) < 1e-5);
  // What a matmul after LibTorch's layer norm would read: its float32 output rounded to bfloat16. The fused
  // kernel rounds its own float32 result, so the two differ only where the float32 values differ in the last bits.
  const auto rounded = theirs.y.to(torch::kBFloat16);
  const double differing = casted.y.ne(rounded).to(torch::kDouble).mean().item<double>();
  MESSAGE("bfloat16 outputs that differ from LibTorch's float32 output rounded: " << differing * 100 << "%");
  CHECK(differing < 1e-3);
  CHECK(relative(casted.y, rounded) < 1e-2);
  CHECK(relative(casted.dx, theirs.dx) < 1e-5);
}

TEST_CASE("GPU: LayerNorm's fused backward builds a graph for double backward like LibTorch's") {
  if (!cuda_here("LayerNorm double backward")) return;
  torch::nn::LayerNorm reference(torch::nn::LayerNormOptions({32}));
  volt::nn::LayerNorm ln(torch::nn::LayerNormOptions({32}));
  same_random_affine(reference, ln, 1);
  reference->to(torch::kCUDA);
  ln->to(torch::kCUDA);
  torch::manual_seed(6);
  const auto x = torch::randn({10, 32}, torch::kCUDA);
  auto second = [&](auto& module) {
    auto xi = x.clone().requires_grad_(true);
    auto y = module(xi);
    auto grads = torch::autograd::grad({(y * y.detach().sin()).sum()}, {xi, module->weight}, {}, true, true);
    auto total = grads[0].pow(2).sum() + grads[1].pow(2).sum();
    auto seconds = torch::autograd::grad({total}, {xi, module->weight});
    return std::vector<torch::Tensor>{grads[0].detach(), grads[1].detach(), seconds[0], seconds[1]};
  };
#if defined(VOLT_DETAIL_HAS_RUNTIME_KERNELS)
  CHECK(ln->fuses(x));
#endif
  const auto ours = second(ln);
  const auto theirs = second(reference);
  for (std::size_t i = 0; i < ours.size(); ++i) {
    CAPTURE(i);
    CHECK(relative(ours[i], theirs[i]) < 1e-4);
  }
}

#if VOLT_DETAIL_HAS_CUDA_GRAPHS
TEST_CASE("GPU: LayerNorm's fused kernels replay in a captured CUDA graph with the eager results") {
  if (!cuda_here("LayerNorm in a CUDA graph")) return;
  volt::nn::LayerNorm ln(torch::nn::LayerNormOptions({256}), /*autocast_output=*/true);
  ln->to(torch::kCUDA);
  torch::manual_seed(3);
  auto x = torch::randn({32, 256}, torch::kCUDA).requires_grad_(true);
  const auto dy = torch::randn({32, 256}, torch::kCUDA).to(torch::kHalf);
  auto step = [&] {
    x.mutable_grad() = torch::Tensor();
    ln->weight.mutable_grad() = torch::Tensor();
    ln->bias.mutable_grad() = torch::Tensor();
    volt::compat::set_autocast_dtype(c10::DeviceType::CUDA, torch::kHalf);
    volt::compat::set_autocast_enabled(c10::DeviceType::CUDA, true);
    auto y = ln(x);
    volt::compat::set_autocast_enabled(c10::DeviceType::CUDA, false);
    y.backward(dy);
    return std::vector<torch::Tensor>{y.detach(), x.grad(), ln->weight.grad(), ln->bias.grad()};
  };
  const auto eager = volt_test::check_graph_replay(step);
  CHECK((eager[0].scalar_type() == torch::kHalf));
  volt::compat::autocast_clear_cache();
}
#endif

namespace {

struct AddResult {
  torch::Tensor h, y, dx, dr, dweight, dbias;
};

// {h, y} = forward_add(x, r) and the gradients of x, r, weight and bias for the loss
// sum(y * dy) + sum(h * dh): h has a use of its own besides the layer norm, as a transformer's residual stream does.
template <typename Forward>
AddResult run_add(const torch::Tensor& x, const torch::Tensor& r, const torch::Tensor& dy, const torch::Tensor& dh,
                  const torch::Tensor& weight, const torch::Tensor& bias, Forward forward_add) {
  auto xi = x.detach().clone().requires_grad_(true);
  auto ri = r.detach().clone().requires_grad_(true);
  for (const auto* p : {&weight, &bias}) {
    if (p->defined() && p->grad().defined()) p->mutable_grad() = torch::Tensor();
  }
  auto [h, y] = forward_add(xi, ri);
  torch::autograd::backward({y, h}, {dy.to(y.scalar_type()), dh.to(h.scalar_type())});
  return {h.detach(), y.detach(), xi.grad(), ri.grad(), weight.grad().clone(), bias.grad().clone()};
}

}  // namespace

TEST_CASE("LayerNorm::forward_add equals the add then LayerNorm bit for bit on the CPU, gradients included") {
  volt::nn::LayerNorm ln(torch::nn::LayerNormOptions({24}));
  same_random_affine(ln, ln, 4);
  torch::manual_seed(9);
  const auto x = torch::randn({5, 7, 24});
  const auto r = torch::randn({5, 7, 24});
  const auto dy = torch::randn({5, 7, 24});
  const auto dh = torch::randn({5, 7, 24});
  CHECK_FALSE(ln->why_not_fused_add(x, r).empty());
  const auto ours = run_add(x, r, dy, dh, ln->weight, ln->bias, [&](auto& xi, auto& ri) { return ln->forward_add(xi, ri); });
  const auto theirs = run_add(x, r, dy, dh, ln->weight, ln->bias, [&](auto& xi, auto& ri) {
    auto h = xi + ri;
    return std::make_pair(h, ln(h));
  });
  CHECK(torch::equal(ours.h, theirs.h));
  CHECK(torch::equal(ours.y, theirs.y));
  CHECK(torch::equal(ours.dx, theirs.dx));
  CHECK(torch::equal(ours.dr, theirs.dr));
  CHECK(torch::equal(ours.dweight, theirs.dweight));
  CHECK(torch::equal(ours.dbias, theirs.dbias));
  // A residual of another shape broadcasts, as the add does; an undefined one is an error that says so.
  const auto row = torch::randn({24});
  auto [h, y] = ln->forward_add(x, row);
  CHECK(torch::equal(h, x + row));
  CHECK_THROWS_WITH_AS(ln->forward_add(x, torch::Tensor()), doctest::Contains("residual is an undefined tensor"),
                       c10::Error);
  CHECK_THROWS_WITH_AS(ln->forward_add(torch::randn({3, 8}), torch::randn({3, 8})), doctest::Contains("[24]"),
                       c10::Error);
}

#if defined(VOLT_DETAIL_HAS_RUNTIME_KERNELS)
TEST_CASE("the fused add + layer norm kernels compile with NVRTC for mixed types (no GPU needed)") {
  if (!volt_test::nvrtc_here()) return;
  int compiled = 0;
  for (int x = 0; x < 3; ++x) {
    for (int r = 0; r < 3; ++r) {
      volt::nn::detail::LayerNormVariant variant;
      variant.n = 384;
      variant.x_type = x;
      variant.y_type = 1;
      variant.w_type = 0;
      variant.has_weight = variant.has_bias = true;
      variant.residual = true;
      variant.r_type = r;
      variant.h_type = x == r ? x : 0;
      std::string error;
      const auto cubin =
          volt::nn::detail::nvrtc_compile(volt::nn::detail::layer_norm_source(variant), "add_layer_norm", 90, &error);
      CAPTURE(x);
      CAPTURE(r);
      CHECK_MESSAGE(!cubin.empty(), error);
      compiled += cubin.empty() ? 0 : 1;
    }
  }
  CHECK(compiled == 9);
}
#endif

TEST_CASE("GPU: LayerNorm::forward_add's fused kernels against a float64 reference, next to LibTorch's own error") {
  if (!cuda_here("LayerNorm::forward_add on CUDA")) return;
  struct Case {
    torch::ScalarType x, r, weight;
  };
  const std::vector<Case> cases = {{torch::kFloat, torch::kFloat, torch::kFloat},
                                   {torch::kFloat, torch::kBFloat16, torch::kFloat},
                                   {torch::kBFloat16, torch::kBFloat16, torch::kBFloat16},
                                   {torch::kHalf, torch::kHalf, torch::kHalf},
                                   {torch::kHalf, torch::kFloat, torch::kFloat}};
  for (const auto& c : cases) {
    CAPTURE(static_cast<int>(c.x));
    CAPTURE(static_cast<int>(c.r));
    const auto options = torch::nn::LayerNormOptions({384});
    volt::nn::LayerNorm ln(options);
    torch::nn::LayerNorm reference(options);
    same_random_affine(reference, ln, 17);
    ln->to(torch::kCUDA, c.weight);
    reference->to(torch::kCUDA, c.weight);
    torch::manual_seed(8);
    const auto x = (torch::randn({4, 300, 384}, torch::kCUDA) * 2 + 0.5).to(c.x);
    const auto r = torch::randn({4, 300, 384}, torch::kCUDA).to(c.r);
    const auto h_type = c10::promoteTypes(c.x, c.r);
    const auto dy = torch::randn({4, 300, 384}, torch::kCUDA).to(h_type);
    const auto dh = torch::randn({4, 300, 384}, torch::kCUDA).to(h_type);
#if defined(VOLT_DETAIL_HAS_RUNTIME_KERNELS)
    CHECK_MESSAGE(ln->why_not_fused_add(x, r).empty(), ln->why_not_fused_add(x, r));
#endif
    const auto ours =
        run_add(x, r, dy, dh, ln->weight, ln->bias, [&](auto& xi, auto& ri) { return ln->forward_add(xi, ri); });
    // The add and LibTorch's layer norm (it takes one type for input and weight: the weight cast to h's type).
    torch::nn::LayerNorm typed(options);
    typed->to(torch::kCUDA, h_type);
    {
      torch::NoGradGuard no_grad;
      typed->weight.copy_(ln->weight);
      typed->bias.copy_(ln->bias);
    }
    const auto theirs = run_add(x, r, dy, dh, typed->weight, typed->bias, [&](auto& xi, auto& ri) {
      auto h = xi + ri;
      return std::make_pair(h, typed(h));
    });
    torch::nn::LayerNorm exact(options);
    exact->to(torch::kCUDA, torch::kDouble);
    {
      torch::NoGradGuard no_grad;
      exact->weight.copy_(ln->weight);
      exact->bias.copy_(ln->bias);
    }
    const auto truth = run_add(x.to(torch::kDouble), r.to(torch::kDouble), dy.to(torch::kDouble),
                               dh.to(torch::kDouble), exact->weight, exact->bias, [&](auto& xi, auto& ri) {
                                 auto h = xi + ri;
                                 return std::make_pair(h, exact(h));
                               });
    CHECK((ours.h.scalar_type() == h_type));
    CHECK((ours.y.scalar_type() == h_type));
    CHECK((ours.dx.scalar_type() == c.x));
    CHECK((ours.dr.scalar_type() == c.r));
    // h is the add's result exactly (the kernel adds in float32 and rounds once, as LibTorch's add).
    CHECK(torch::equal(ours.h, theirs.h));
    const std::vector<std::pair<const char*, std::vector<torch::Tensor>>> compared = {
        {"y", {ours.y, theirs.y, truth.y}},      {"dx", {ours.dx, theirs.dx, truth.dx}},
        {"dr", {ours.dr, theirs.dr, truth.dr}},  {"dweight", {ours.dweight, theirs.dweight, truth.dweight}},
        {"dbias", {ours.dbias, theirs.dbias, truth.dbias}}};
    for (const auto& [name, t] : compared) {
      const std::string what = name;
      CAPTURE(what);
      // Each result is rounded once to its own type: dr to the residual's, dx to the input's.
      const double slack = t[0].scalar_type() == torch::kFloat ? 1e-5 : 1e-2;
      const double mine = relative(t[0], t[2]), libtorch = relative(t[1], t[2]);
      MESSAGE(std::string(c10::toString(c.x)) << " + " << std::string(c10::toString(c.r)) << ", " << what << ": relative error ours " << mine
                                 << ", add + LibTorch's layer norm " << libtorch);
      CHECK(mine <= 2 * libtorch + slack * 0.1);
      CHECK(mine < slack);
    }
    // Only y used (h's own gradient undefined), and the same bits again.
    auto xi = x.clone().requires_grad_(true);
    auto [h_only, y_only] = ln->forward_add(xi, r);
    y_only.backward(dy.to(y_only.scalar_type()));
    const auto xi_grad = xi.grad().clone();
    auto xj = x.clone().requires_grad_(true);
    auto [h_again, y_again] = ln->forward_add(xj, r);
    y_again.backward(dy.to(y_again.scalar_type()));
    CHECK(torch::equal(xj.grad(), xi_grad));
    CHECK(torch::equal(y_again, y_only));
  }
}

#if VOLT_DETAIL_HAS_CUDA_GRAPHS
TEST_CASE("GPU: LayerNorm::forward_add under autocast with autocast_output, a captured graph and double backward") {
  if (!cuda_here("LayerNorm::forward_add under autocast")) return;
  volt::nn::LayerNorm ln(torch::nn::LayerNormOptions({256}), /*autocast_output=*/true);
  ln->to(torch::kCUDA);
  torch::manual_seed(5);
  auto x = torch::randn({64, 256}, torch::kCUDA).requires_grad_(true);  // the float32 residual stream
  auto r = torch::randn({64, 256}, torch::kCUDA).to(torch::kBFloat16).requires_grad_(true);
  const auto dy = torch::randn({64, 256}, torch::kCUDA).to(torch::kBFloat16);
  const auto dh = torch::randn({64, 256}, torch::kCUDA);
  auto step = [&] {
    for (auto* t : {&x, &r, &ln->weight, &ln->bias}) t->mutable_grad() = torch::Tensor();
    volt::compat::set_autocast_dtype(c10::DeviceType::CUDA, torch::kBFloat16);
    volt::compat::set_autocast_enabled(c10::DeviceType::CUDA, true);
    auto [h, y] = ln->forward_add(x, r);
    volt::compat::set_autocast_enabled(c10::DeviceType::CUDA, false);
    torch::autograd::backward({y, h}, {dy, dh});
    return std::vector<torch::Tensor>{h.detach(), y.detach(), x.grad(), r.grad(), ln->weight.grad(), ln->bias.grad()};
  };
#if defined(VOLT_DETAIL_HAS_RUNTIME_KERNELS)
  CHECK(ln->why_not_fused_add(x, r).empty());
#endif
  const auto eager = volt_test::check_graph_replay(step);
  CHECK((eager[0].scalar_type() == torch::kFloat));
  CHECK((eager[1].scalar_type() == torch::kBFloat16));
  CHECK((eager[2].scalar_type() == torch::kFloat));
  CHECK((eager[3].scalar_type() == torch::kBFloat16));
  // Against the unfused add and LibTorch's layer norm (float32 out, then rounded as a matmul after it would).
  torch::nn::LayerNorm reference(torch::nn::LayerNormOptions({256}));
  reference->to(torch::kCUDA);
  auto xr = x.detach().clone().requires_grad_(true);
  auto rr = r.detach().clone().requires_grad_(true);
  auto hr = xr + rr;
  auto yr = reference(hr);
  torch::autograd::backward({yr, hr}, {dy.to(torch::kFloat), dh});
  CHECK(torch::equal(eager[0], hr.detach()));
  CHECK(relative(eager[1], yr.detach()) < 1e-2);
  CHECK(relative(eager[2], xr.grad()) < 1e-5);
  CHECK(relative(eager[3], rr.grad()) < 1e-2);
  volt::compat::autocast_clear_cache();
  // Double backward through the fused node (float32, no autocast) against the unfused ops.
  volt::nn::LayerNorm plain(torch::nn::LayerNormOptions({32}));
  plain->to(torch::kCUDA);
  torch::nn::LayerNorm plain_reference(torch::nn::LayerNormOptions({32}));
  plain_reference->to(torch::kCUDA);
  const auto x2 = torch::randn({10, 32}, torch::kCUDA), r2 = torch::randn({10, 32}, torch::kCUDA);
  auto second = [&](auto&& forward_add) {
    auto xi = x2.clone().requires_grad_(true), ri = r2.clone().requires_grad_(true);
    auto [h, y] = forward_add(xi, ri);
    auto grads = torch::autograd::grad({(y * y.detach().sin()).sum() + (h * h.detach().cos()).sum()}, {xi, ri}, {},
                                       true, true);
    auto seconds = torch::autograd::grad({grads[0].pow(2).sum() + grads[1].pow(3).sum()}, {xi, ri});
    return std::vector<torch::Tensor>{grads[0].detach(), grads[1].detach(), seconds[0], seconds[1]};
  };
  const auto ours = second([&](auto& xi, auto& ri) { return plain->forward_add(xi, ri); });
  const auto theirs = second([&](auto& xi, auto& ri) {
    auto h = xi + ri;
    return std::make_pair(h, plain_reference(h));
  });
  for (std::size_t i = 0; i < ours.size(); ++i) {
    CAPTURE(i);
    CHECK(relative(ours[i], theirs[i]) < 1e-4);
  }
}
#endif

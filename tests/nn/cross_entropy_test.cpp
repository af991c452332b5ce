// volt::nn::functional::cross_entropy and volt::nn::CrossEntropyLoss: LibTorch's results bit for bit where the fused
// kernels do not apply (the CPU here), the module's buffer and printing, the differentiable backward against
// LibTorch's autograd; the kernels' sources compile with NVRTC for every variant (no GPU needed); and on CUDA the
// fused kernels against a float64 reference next to LibTorch's own error, for every option, under autocast, with
// -inf logits and bad targets, double backward, run to run and inside a captured CUDA graph.
#include <torch/torch.h>

#include <doctest/doctest.h>

#include "nn_test_common.hpp"
#include "test_common.hpp"

#include <volt/volt.hpp>

#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

using volt_test::cuda_here;
using volt_test::relative;

namespace {

namespace F = torch::nn::functional;

struct LossResult {
  torch::Tensor loss, dx;
};

// loss = loss_of(x) and x's gradient for the loss gradient `dloss` (a scalar or one per row), from a fresh leaf.
template <typename Loss>
LossResult run_loss(const torch::Tensor& x, const torch::Tensor& dloss, Loss loss_of) {
  auto xi = x.detach().clone().requires_grad_(true);
  auto loss = loss_of(xi);
  loss.backward(dloss.to(loss.scalar_type()).expand(loss.sizes()));
  return {loss.detach(), xi.grad()};
}

// Every reduction, with and without ignored targets and label smoothing.
std::vector<F::CrossEntropyFuncOptions> option_sets() {
  std::vector<F::CrossEntropyFuncOptions> sets;
  for (const double smoothing : {0.0, 0.1}) {
    sets.push_back(F::CrossEntropyFuncOptions().label_smoothing(smoothing));
    sets.push_back(F::CrossEntropyFuncOptions().reduction(torch::kSum).label_smoothing(smoothing));
    sets.push_back(F::CrossEntropyFuncOptions().reduction(torch::kNone).label_smoothing(smoothing));
    sets.push_back(F::CrossEntropyFuncOptions().ignore_index(2).label_smoothing(smoothing));
  }
  return sets;
}

std::string describe(const F::CrossEntropyFuncOptions& options) {
  std::ostringstream text;
  text << "reduction " << torch::enumtype::get_enum_name(options.reduction()) << ", ignore_index "
       << options.ignore_index() << ", label_smoothing " << options.label_smoothing();
  return text.str();
}

// Targets in [0, classes) with every fifth one set to 2 (ignored where ignore_index is 2).
torch::Tensor targets_for(std::int64_t rows, std::int64_t classes, const torch::Device& device) {
  auto t = torch::randint(classes, {rows}, torch::TensorOptions().dtype(torch::kLong));
  t.index_put_({torch::indexing::Slice(0, torch::indexing::None, 5)}, std::min<std::int64_t>(2, classes - 1));
  return t.to(device);
}

}  // namespace

TEST_CASE("cross_entropy equals LibTorch's bit for bit on the CPU, for every option, gradients included") {
  torch::manual_seed(7);
  for (const auto dtype : {torch::kFloat, torch::kDouble}) {
    const auto x = (torch::randn({37, 11}) * 3).to(dtype);
    const auto target = targets_for(37, 11, torch::kCPU);
    for (const auto& options : option_sets()) {
      CAPTURE(describe(options));
      CHECK_FALSE(volt::nn::functional::cross_entropy_fuses(x, target, options));
      const auto dloss = torch::rand({37}).to(dtype);
      const bool rows = torch::enumtype::reduction_get_enum(options.reduction()) == at::Reduction::None;
      const auto g = rows ? dloss : dloss[0];
      const auto ours =
          run_loss(x, g, [&](auto& xi) { return volt::nn::functional::cross_entropy(xi, target, options); });
      const auto theirs = run_loss(x, g, [&](auto& xi) { return F::cross_entropy(xi, target, options); });
      CHECK(torch::equal(ours.loss, theirs.loss));
      CHECK(torch::equal(ours.dx, theirs.dx));
    }
  }
  // Class weights, class probabilities and (N, C, d) inputs take LibTorch's op too.
  const auto x = torch::randn({6, 5, 3});
  const auto target = torch::randint(5, {6, 3}, torch::TensorOptions().dtype(torch::kLong));
  CHECK(torch::equal(volt::nn::functional::cross_entropy(x, target), F::cross_entropy(x, target)));
  const auto weights = torch::rand({5});
  const auto x2 = torch::randn({6, 5});
  const auto t2 = torch::randint(5, {6}, torch::TensorOptions().dtype(torch::kLong));
  const auto weighted = F::CrossEntropyFuncOptions().weight(weights);
  CHECK(torch::equal(volt::nn::functional::cross_entropy(x2, t2, weighted), F::cross_entropy(x2, t2, weighted)));
  const auto probabilities = torch::softmax(torch::randn({6, 5}), 1);
  CHECK(torch::equal(volt::nn::functional::cross_entropy(x2, probabilities), F::cross_entropy(x2, probabilities)));
  CHECK(volt::nn::functional::cross_entropy_why_not_fused(x2, t2).find("CUDA") != std::string::npos);
}

TEST_CASE("cross_entropy reports LibTorch's errors for bad input") {
  const auto x = torch::randn({4, 3});
  const auto wrong_type = torch::zeros({4}, torch::TensorOptions().dtype(torch::kInt));
  std::string ours, theirs;
  try {
    volt::nn::functional::cross_entropy(x, wrong_type);
  } catch (const c10::Error& error) {
    ours = error.what_without_backtrace();
  }
  try {
    F::cross_entropy(x, wrong_type);
  } catch (const c10::Error& error) {
    theirs = error.what_without_backtrace();
  }
  CHECK_FALSE(ours.empty());
  CHECK(ours == theirs);
  CHECK_THROWS_WITH_AS(volt::nn::functional::cross_entropy(x, torch::zeros({5}, torch::kLong)),
                       doctest::Contains("batch_size"), c10::Error);
  CHECK_THROWS_WITH_AS(volt::nn::functional::cross_entropy(
                           x, torch::zeros({4}, torch::kLong), F::CrossEntropyFuncOptions().label_smoothing(1.5)),
                       doctest::Contains("label_smoothing"), c10::Error);
}

TEST_CASE("CrossEntropyLoss holds its class weights as LibTorch's module does, prints and clones") {
  const auto weights = torch::tensor({1.0f, 2.0f, 0.5f});
  volt::nn::CrossEntropyLoss ours(torch::nn::CrossEntropyLossOptions().weight(weights).ignore_index(1));
  torch::nn::CrossEntropyLoss theirs(torch::nn::CrossEntropyLossOptions().weight(weights).ignore_index(1));
  const auto buffers = ours->named_buffers();
  REQUIRE(buffers.size() == 1);
  CHECK(buffers[0].key() == "weight");
  CHECK(theirs->named_buffers().size() == 1);
  CHECK(torch::equal(ours->weight, weights));
  torch::manual_seed(2);
  const auto x = torch::randn({9, 3});
  const auto target = torch::randint(3, {9}, torch::TensorOptions().dtype(torch::kLong));
  CHECK(torch::equal(ours(x, target), theirs(x, target)));
  CHECK_FALSE(ours->fuses(x, target));
  // The module's own buffer is what it uses: changed in place, both modules see the change alike.
  {
    torch::NoGradGuard no_grad;
    ours->weight.mul_(3);
  }
  CHECK(torch::equal(ours(x, target), F::cross_entropy(x, target, F::CrossEntropyFuncOptions().weight(ours->weight)
                                                                       .ignore_index(1))));
  volt::nn::CrossEntropyLoss plain;
  CHECK(plain->named_buffers().is_empty());
  std::ostringstream printed;
  printed << *volt::nn::CrossEntropyLoss(torch::nn::CrossEntropyLossOptions().label_smoothing(0.25));
  CHECK(printed.str() == "volt::nn::CrossEntropyLoss(ignore_index=-100, label_smoothing=0.25)");
  auto copy = std::dynamic_pointer_cast<volt::nn::CrossEntropyLossImpl>(ours->clone());
  REQUIRE(copy);
  CHECK(torch::equal(copy->weight, ours->weight));
  CHECK(copy->weight.data_ptr() != ours->weight.data_ptr());
}

TEST_CASE("the fused backward's differentiable form equals LibTorch's gradient (the double-backward path)") {
  torch::manual_seed(5);
  const auto x = torch::randn({23, 7}, torch::kDouble) * 2;
  const auto target = targets_for(23, 7, torch::kCPU);
  const auto dloss = torch::rand({23}, torch::kDouble);
  for (const double smoothing : {0.0, 0.3}) {
    CAPTURE(smoothing);
    const auto options = F::CrossEntropyFuncOptions().reduction(torch::kNone).ignore_index(2).label_smoothing(smoothing);
    const auto theirs = run_loss(x, dloss, [&](auto& xi) { return F::cross_entropy(xi, target, options); });
    const auto ours = volt::nn::detail::cross_entropy_backward_differentiable(x, target, dloss, 2, smoothing);
    // Float32 arithmetic inside, as the kernels.
    CHECK(relative(ours, theirs.dx) < 1e-6);
    CHECK(ours.index({torch::indexing::Slice(0, torch::indexing::None, 5)}).abs().max().item<double>() == 0.0);
  }
}

#if defined(VOLT_DETAIL_HAS_RUNTIME_KERNELS)
TEST_CASE("the fused cross-entropy's kernels compile with NVRTC for every variant (no GPU needed)") {
  if (!volt_test::nvrtc_here()) return;
  int compiled = 0, tried = 0;
  for (const std::int64_t classes : {1, 3, 10, 1000, 8192, 50257}) {
    for (int type = 0; type < 3; ++type) {
      for (const bool vector : {false, true}) {
        for (const bool smoothing : {false, true}) {
          if (vector && classes % 4 != 0) continue;
          volt::nn::detail::CrossEntropyVariant variant;
          variant.classes = classes;
          variant.x_type = type;
          variant.vector = vector;
          variant.smoothing = smoothing;
          std::string error;
          const auto cubin = volt::nn::detail::nvrtc_compile(volt::nn::detail::cross_entropy_source(variant),
                                                             "cross_entropy", 90, &error);
          CAPTURE(classes);
          CAPTURE(type);
          CHECK_MESSAGE(!cubin.empty(), error);
          ++tried;
          compiled += cubin.empty() ? 0 : 1;
        }
      }
    }
  }
  CHECK(tried == 3 * 2 * (2 * 2 + 4));  // 1000 and 8192 with and without vectors; 1, 3, 10, 50257 without
  CHECK(compiled == tried);
}
#endif

TEST_CASE("GPU: the fused cross-entropy against a float64 reference, next to LibTorch's own error") {
  if (!cuda_here("cross_entropy on CUDA")) return;
  struct Case {
    torch::ScalarType type;
    std::int64_t rows, classes;
  };
  const std::vector<Case> cases = {{torch::kFloat, 300, 10},     {torch::kBFloat16, 513, 8192},
                                   {torch::kHalf, 257, 1000},    {torch::kFloat, 64, 50257},
                                   {torch::kBFloat16, 33, 3},    {torch::kFloat, 129, 4096}};
  for (const auto& c : cases) {
    CAPTURE(c.classes);
    CAPTURE(static_cast<int>(c.type));
    torch::manual_seed(31);
    const auto x = (torch::randn({c.rows, c.classes}, torch::kCUDA) * 4).to(c.type);
    const auto target = targets_for(c.rows, c.classes, torch::kCUDA);
    const auto dloss = torch::rand({c.rows}, torch::kCUDA) + 0.5;
#if defined(VOLT_DETAIL_HAS_RUNTIME_KERNELS)
    CHECK_MESSAGE(volt::nn::functional::cross_entropy_fuses(x, target),
                  volt::nn::functional::cross_entropy_why_not_fused(x, target));
#endif
    for (const auto& options : option_sets()) {
      CAPTURE(describe(options));
      const bool rows = torch::enumtype::reduction_get_enum(options.reduction()) == at::Reduction::None;
      const auto g = rows ? dloss : dloss[0];
      const auto ours =
          run_loss(x, g, [&](auto& xi) { return volt::nn::functional::cross_entropy(xi, target, options); });
      const auto theirs = run_loss(x, g, [&](auto& xi) { return F::cross_entropy(xi, target, options); });
      const auto truth =
          run_loss(x.to(torch::kDouble), g.to(torch::kDouble), [&](auto& xi) { return F::cross_entropy(xi, target, options); });
      CHECK((ours.loss.scalar_type() == c.type));
      CHECK((ours.dx.scalar_type() == c.type));
      CHECK(ours.loss.sizes() == theirs.loss.sizes());
      const double ref_loss = relative(theirs.loss, truth.loss), ref_dx = relative(theirs.dx, truth.dx);
      const double our_loss = relative(ours.loss, truth.loss), our_dx = relative(ours.dx, truth.dx);
      MESSAGE(c.rows << " x " << c.classes << " " << std::string(c10::toString(c.type)) << ", " << describe(options)
                     << ": relative error ours / LibTorch's: loss " << our_loss << " / " << ref_loss << ", dx "
                     << our_dx << " / " << ref_dx);
      // The loss is rounded to the logits' type at the end, as LibTorch's; the gradient once, from float32.
      const double slack = c.type == torch::kFloat ? 1e-5 : 1e-2;
      CHECK(our_loss <= 2 * ref_loss + slack * 0.1);
      CHECK(our_dx <= 2 * ref_dx + slack * 0.1);
      CHECK(our_loss < slack);
      CHECK(our_dx < slack);
      // The same inputs give the same bits again (no atomics).
      const auto again =
          run_loss(x, g, [&](auto& xi) { return volt::nn::functional::cross_entropy(xi, target, options); });
      CHECK(torch::equal(again.loss, ours.loss));
      CHECK(torch::equal(again.dx, ours.dx));
    }
  }
  // A non-contiguous input and class weights take LibTorch's op (and say why).
  const auto x = torch::randn({10, 64}, torch::kCUDA);
  const auto target = torch::randint(10, {64}, torch::TensorOptions().dtype(torch::kLong).device(torch::kCUDA));
  CHECK_FALSE(volt::nn::functional::cross_entropy_fuses(x.t(), target));
  CHECK(volt::nn::functional::cross_entropy_why_not_fused(x.t(), target).find("contiguous") != std::string::npos);
  CHECK(torch::equal(volt::nn::functional::cross_entropy(x.t(), target), F::cross_entropy(x.t(), target)));
  const auto weighted = F::CrossEntropyFuncOptions().weight(torch::rand({10}, torch::kCUDA));
  CHECK_FALSE(volt::nn::functional::cross_entropy_fuses(x.t().contiguous(), target, weighted));
}

TEST_CASE("GPU: the fused cross-entropy under CUDA autocast: a float32 loss and the logits' gradient type") {
  if (!cuda_here("cross_entropy under CUDA autocast")) return;
  torch::manual_seed(12);
  const auto logits = (torch::randn({4096, 8192}, torch::kCUDA) * 2).to(torch::kBFloat16);
  const auto target = torch::randint(8192, {4096}, torch::TensorOptions().dtype(torch::kLong).device(torch::kCUDA));
  auto under_autocast = [](auto&& body) { return volt_test::under_cuda_autocast(torch::kBFloat16, body); };
  const auto one = torch::ones({}, torch::kCUDA);
  const auto ours = under_autocast(
      [&] { return run_loss(logits, one, [&](auto& xi) { return volt::nn::functional::cross_entropy(xi, target); }); });
  const auto theirs =
      under_autocast([&] { return run_loss(logits, one, [&](auto& xi) { return F::cross_entropy(xi, target); }); });
  CHECK((theirs.loss.scalar_type() == torch::kFloat));
  CHECK((ours.loss.scalar_type() == torch::kFloat));
  CHECK((ours.dx.scalar_type() == torch::kBFloat16));
  CHECK((theirs.dx.scalar_type() == torch::kBFloat16));
  // LibTorch's cross_entropy passes the logits' type to log_softmax, so under autocast its log-softmax is bfloat16
  // (only nll_loss runs in float32); volt's is float32 throughout. Both against float64 from the same logits:
  const auto truth = run_loss(logits.to(torch::kDouble), one.to(torch::kDouble),
                         [&](auto& xi) { return F::cross_entropy(xi, target); });
  const double our_loss = relative(ours.loss, truth.loss), their_loss = relative(theirs.loss, truth.loss);
  const double our_dx = relative(ours.dx, truth.dx), their_dx = relative(theirs.dx, truth.dx);
  MESSAGE("under BF16 autocast, relative error against float64, ours / LibTorch's: loss " << our_loss << " / "
                                                                                          << their_loss << ", dx "
                                                                                          << our_dx << " / "
                                                                                          << their_dx);
  CHECK(our_loss < 1e-6);
  CHECK(our_loss <= their_loss);
  CHECK(our_dx < 8e-3);  // the gradient rounded once to bfloat16
  CHECK(our_dx <= their_dx + 1e-3);
}

TEST_CASE("GPU: the fused cross-entropy with -inf logits, huge logits and targets outside the classes") {
  if (!cuda_here("cross_entropy edge cases")) return;
  const float inf = std::numeric_limits<float>::infinity();
  auto x = torch::randn({6, 12}, torch::kCUDA) * 3;
  x.index_put_({0, torch::indexing::Slice(0, 6)}, -inf);  // masked classes: a row with some -inf logits
  x.index_put_({1}, -inf);                                 // every class masked: LibTorch gives NaN
  x.index_put_({2}, x.index({2}) * 1e4);                   // far beyond exp's range without the maximum shift
  auto target = torch::tensor({7, 3, 5, 0, 11, 4}, torch::TensorOptions().dtype(torch::kLong)).to(torch::kCUDA);
  const auto none = F::CrossEntropyFuncOptions().reduction(torch::kNone);
  const auto rows = torch::rand({6}, torch::kCUDA);
  const auto ours = run_loss(x, rows, [&](auto& xi) { return volt::nn::functional::cross_entropy(xi, target, none); });
  const auto theirs = run_loss(x, rows, [&](auto& xi) { return F::cross_entropy(xi, target, none); });
  CHECK(torch::equal(ours.loss.isnan(), theirs.loss.isnan()));
  CHECK(torch::equal(ours.dx.isnan(), theirs.dx.isnan()));
  CHECK(ours.loss[1].isnan().item<bool>());
  const auto finite = torch::tensor({0, 2, 3, 4, 5}, torch::TensorOptions().dtype(torch::kLong).device(torch::kCUDA));
  CHECK(relative(ours.loss.index_select(0, finite), theirs.loss.index_select(0, finite)) < 1e-5);
  CHECK(relative(ours.dx.index_select(0, finite), theirs.dx.index_select(0, finite)) < 1e-5);
  // A target past the last class: that row's loss and gradient are NaN, the others unharmed (LibTorch's kernel
  // would stop the process with a device-side assert instead, so there is no LibTorch result to compare).
  target.index_put_({3}, 12);
  target.index_put_({4}, -5);
  const auto bad = run_loss(x, rows, [&](auto& xi) { return volt::nn::functional::cross_entropy(xi, target, none); });
  CHECK(bad.loss[3].isnan().item<bool>());
  CHECK(bad.loss[4].isnan().item<bool>());
  CHECK(bad.dx[3].isnan().all().item<bool>());
  CHECK(torch::equal(bad.loss[5], ours.loss[5]));
  CHECK(torch::equal(bad.dx[5], ours.dx[5]));
  CHECK(volt::nn::functional::cross_entropy(x, target).isnan().item<bool>());
  // Every target ignored: mean over no rows is NaN, as LibTorch's; sum is 0.
  const auto ignored = torch::full({6}, -100, torch::TensorOptions().dtype(torch::kLong).device(torch::kCUDA));
  CHECK(volt::nn::functional::cross_entropy(x, ignored).isnan().item<bool>());
  CHECK(F::cross_entropy(x, ignored).isnan().item<bool>());
  CHECK(volt::nn::functional::cross_entropy(x, ignored, F::CrossEntropyFuncOptions().reduction(torch::kSum))
            .item<float>() == 0.0f);
}

TEST_CASE("GPU: the fused cross-entropy's backward builds a graph for double backward like LibTorch's") {
  if (!cuda_here("cross_entropy double backward")) return;
  torch::manual_seed(6);
  const auto x = torch::randn({10, 32}, torch::kCUDA);
  const auto target = targets_for(10, 32, torch::kCUDA);
  auto second = [&](const torch::Tensor& input, auto&& loss_of) {
    auto xi = input.clone().requires_grad_(true);
    auto grads = torch::autograd::grad({loss_of(xi)}, {xi}, {}, true, true);
    auto seconds = torch::autograd::grad({(grads[0] * grads[0].detach().cos()).sum()}, {xi});
    return std::vector<torch::Tensor>{grads[0].detach(), seconds[0]};
  };
  const auto options = F::CrossEntropyFuncOptions().label_smoothing(0.2).ignore_index(2);
  const auto ours = second(x, [&](auto& xi) { return volt::nn::functional::cross_entropy(xi, target, options); });
  const auto theirs = second(x, [&](auto& xi) { return F::cross_entropy(xi, target, options); });
  const auto truth = second(x.to(torch::kDouble), [&](auto& xi) { return F::cross_entropy(xi, target, options); });
  // The second derivative cancels: float32 computations land ~4e-5 of its largest value from float64, LibTorch's
  // as ours.
  for (std::size_t i = 0; i < ours.size(); ++i) {
    CAPTURE(i);
    const double mine = relative(ours[i], truth[i]), libtorch = relative(theirs[i], truth[i]);
    MESSAGE("derivative " << i + 1 << ": relative error against float64, ours " << mine << ", LibTorch's "
                          << libtorch);
    CHECK(mine <= 2 * libtorch + 1e-6);
    CHECK(mine < 1e-3);
  }
}

#if VOLT_DETAIL_HAS_CUDA_GRAPHS
TEST_CASE("GPU: the fused cross-entropy replays in a captured CUDA graph with the eager results") {
  if (!cuda_here("cross_entropy in a CUDA graph")) return;
  torch::manual_seed(3);
  auto x = torch::randn({512, 1000}, torch::kCUDA).to(torch::kHalf).requires_grad_(true);
  const auto target = targets_for(512, 1000, torch::kCUDA);
  const auto options = F::CrossEntropyFuncOptions().ignore_index(2).label_smoothing(0.05);
  auto step = [&] {
    x.mutable_grad() = torch::Tensor();
    auto loss = volt::nn::functional::cross_entropy(x, target, options);
    loss.backward();
    return std::vector<torch::Tensor>{loss.detach(), x.grad()};
  };
  volt_test::check_graph_replay(step);
}
#endif

// volt::nn::BatchNormReLU2d and BatchNormAddReLU2d: BatchNorm2d's state under its names, results equal to
// BatchNorm2d + (add) + ReLU bit for bit on the CPU, clear errors, and on CUDA cuDNN's fused kernels checked
// against the unfused modules (and a float32 reference for the add form), also inside a captured CUDA graph.
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

// The names in order, comma-separated.
std::string names_of(const torch::OrderedDict<std::string, torch::Tensor>& dict) {
  std::string names;
  for (const auto& item : dict) names += (names.empty() ? "" : ",") + item.key();
  return names;
}

// A random affine state (so that weight and bias matter), the same in both modules.
template <typename Module>
void randomize(Module& module, std::uint64_t seed) {
  torch::manual_seed(seed);
  torch::NoGradGuard no_grad;
  if (module->weight.defined()) module->weight.uniform_(0.5, 1.5);
  if (module->bias.defined()) module->bias.normal_(0.0, 0.2);
}

template <typename From, typename To>
void copy_state(From& from, To& to) {
  torch::NoGradGuard no_grad;
  auto target = to->named_parameters();
  for (const auto& item : from->named_parameters()) target[item.key()].copy_(item.value());
  auto buffers = to->named_buffers();
  for (const auto& item : from->named_buffers()) buffers[item.key()].copy_(item.value());
}

struct Outputs {
  torch::Tensor y, dx, dz, dweight, dbias;
};

// One training step's output and gradients of `forward` (dy fixed), from fresh leaves of x and z.
template <typename Forward>
Outputs step(const torch::Tensor& x, const torch::Tensor& z, const torch::Tensor& dy, const torch::Tensor& weight,
             const torch::Tensor& bias, Forward forward) {
  auto xi = x.detach().clone().requires_grad_(true);
  auto zi = z.defined() ? z.detach().clone().requires_grad_(true) : torch::Tensor();
  if (weight.grad().defined()) weight.mutable_grad().zero_();
  if (bias.grad().defined()) bias.mutable_grad().zero_();
  auto y = forward(xi, zi);
  y.backward(dy);
  auto grad_of = [](const torch::Tensor& t) { return t.grad().defined() ? t.grad().clone() : torch::Tensor(); };
  return {y.detach(), xi.grad(), zi.defined() ? zi.grad() : torch::Tensor(), grad_of(weight), grad_of(bias)};
}

}  // namespace

TEST_CASE("BatchNormReLU2d and BatchNormAddReLU2d hold BatchNorm2d's parameters and buffers under its names") {
  torch::nn::BatchNorm2d reference(torch::nn::BatchNormOptions(16).eps(1e-3).momentum(0.3));
  volt::nn::BatchNormReLU2d fused(torch::nn::BatchNormOptions(16).eps(1e-3).momentum(0.3));
  volt::nn::BatchNormAddReLU2d residual(16);
  CHECK(names_of(fused->named_parameters()) == names_of(reference->named_parameters()));
  CHECK(names_of(fused->named_buffers()) == names_of(reference->named_buffers()));
  CHECK(names_of(residual->named_buffers()) == names_of(reference->named_buffers()));
  CHECK(names_of(reference->named_buffers()) == "running_mean,running_var,num_batches_tracked");
  for (const auto& item : reference->named_parameters()) {
    CHECK(torch::equal(fused->named_parameters()[item.key()], item.value()));
  }
  for (const auto& item : reference->named_buffers()) {
    const auto ours = fused->named_buffers()[item.key()];
    CHECK((ours.scalar_type() == item.value().scalar_type()));
    CHECK(torch::equal(ours, item.value()));
  }
  // A BatchNorm2d's archive loads into the fused module and back.
  randomize(reference, 3);
  reference->running_mean.normal_();
  reference->num_batches_tracked.fill_(7);
  std::stringstream bytes;
  {
    torch::serialize::OutputArchive archive;
    reference->save(archive);
    archive.save_to(bytes);
  }
  torch::serialize::InputArchive in;
  in.load_from(bytes);
  fused->load(in);
  CHECK(torch::equal(fused->weight, reference->weight));
  CHECK(torch::equal(fused->running_mean, reference->running_mean));
  CHECK(fused->num_batches_tracked.item<std::int64_t>() == 7);

  std::ostringstream printed;
  printed << *fused;
  CHECK(printed.str() == "volt::nn::BatchNormReLU2d(16, eps=0.001, momentum=0.3, affine=true, track_running_stats=true)");
}

TEST_CASE("BatchNormReLU2d equals BatchNorm2d then ReLU bit for bit on the CPU: training, evaluation, options") {
  struct Case {
    const char* name;
    torch::nn::BatchNormOptions options;
    torch::MemoryFormat format;
  };
  const std::vector<Case> cases{
      {"defaults", torch::nn::BatchNormOptions(8), torch::MemoryFormat::Contiguous},
      {"channels-last", torch::nn::BatchNormOptions(8), torch::MemoryFormat::ChannelsLast},
      {"cumulative average (momentum none)", torch::nn::BatchNormOptions(8).momentum(c10::nullopt),
       torch::MemoryFormat::Contiguous},
      {"affine false", torch::nn::BatchNormOptions(8).affine(false), torch::MemoryFormat::Contiguous},
      {"no running statistics", torch::nn::BatchNormOptions(8).track_running_stats(false),
       torch::MemoryFormat::Contiguous},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    torch::nn::BatchNorm2d bn(c.options);
    volt::nn::BatchNormReLU2d fused(c.options);
    randomize(bn, 11);
    copy_state(bn, fused);
    CHECK_FALSE(fused->fuses(torch::randn({2, 8, 3, 3})));
    for (int i = 0; i < 3; ++i) {
      torch::manual_seed(100 + i);
      const auto x = torch::randn({4, 8, 5, 5}).contiguous(c.format);
      const auto dy = torch::randn({4, 8, 5, 5});
      auto weight = c.options.affine() ? fused->weight : torch::zeros({1}, torch::requires_grad());
      auto bias = c.options.affine() ? fused->bias : torch::zeros({1}, torch::requires_grad());
      auto ref_weight = c.options.affine() ? bn->weight : torch::zeros({1}, torch::requires_grad());
      auto ref_bias = c.options.affine() ? bn->bias : torch::zeros({1}, torch::requires_grad());
      const auto ours = step(x, {}, dy, weight, bias, [&](auto& xi, auto&) { return fused->forward(xi); });
      const auto theirs =
          step(x, {}, dy, ref_weight, ref_bias, [&](auto& xi, auto&) { return torch::relu(bn->forward(xi)); });
      CHECK(torch::equal(ours.y, theirs.y));
      CHECK(torch::equal(ours.dx, theirs.dx));
      if (c.options.affine()) {
        CHECK(torch::equal(ours.dweight, theirs.dweight));
        CHECK(torch::equal(ours.dbias, theirs.dbias));
      }
    }
    if (c.options.track_running_stats()) {
      CHECK(torch::equal(fused->running_mean, bn->running_mean));
      CHECK(torch::equal(fused->running_var, bn->running_var));
      CHECK(fused->num_batches_tracked.item<std::int64_t>() == 3);
      CHECK(bn->num_batches_tracked.item<std::int64_t>() == 3);
      CHECK_FALSE(torch::equal(fused->running_mean, torch::zeros({8})));
    }
    fused->eval();
    bn->eval();
    const auto x = torch::randn({2, 8, 4, 4});
    CHECK(torch::equal(fused->forward(x), torch::relu(bn->forward(x))));
  }
}

TEST_CASE("BatchNormAddReLU2d equals BatchNorm2d, the add and ReLU bit for bit on the CPU, gradients included") {
  torch::nn::BatchNorm2d bn(6);
  volt::nn::BatchNormAddReLU2d fused(6);
  randomize(bn, 5);
  copy_state(bn, fused);
  for (int i = 0; i < 2; ++i) {
    torch::manual_seed(40 + i);
    const auto x = torch::randn({3, 6, 4, 4});
    const auto z = torch::randn({3, 6, 4, 4});
    const auto dy = torch::randn({3, 6, 4, 4});
    const auto ours = step(x, z, dy, fused->weight, fused->bias, [&](auto& xi, auto& zi) { return fused(xi, zi); });
    const auto theirs =
        step(x, z, dy, bn->weight, bn->bias, [&](auto& xi, auto& zi) { return torch::relu(bn(xi) + zi); });
    CHECK(torch::equal(ours.y, theirs.y));
    CHECK(torch::equal(ours.dx, theirs.dx));
    CHECK(torch::equal(ours.dz, theirs.dz));
    CHECK(torch::equal(ours.dweight, theirs.dweight));
    CHECK(torch::equal(ours.dbias, theirs.dbias));
    // Half the residual's gradient is masked off by the ReLU: the test sees the ReLU, not just the add.
    CHECK_FALSE(torch::equal(ours.dz, dy));
  }
  CHECK(torch::equal(fused->running_var, bn->running_var));
}

TEST_CASE("the fused modules clone deeply and say what was wrong with an input") {
  volt::nn::BatchNormReLU2d bn(4);
  randomize(bn, 9);
  auto copy = std::dynamic_pointer_cast<volt::nn::BatchNormReLU2dImpl>(bn->clone());
  REQUIRE(copy);
  CHECK(torch::equal(copy->weight, bn->weight));
  CHECK(copy->weight.data_ptr() != bn->weight.data_ptr());
  copy->weight.data().fill_(3);
  CHECK_FALSE(torch::equal(copy->weight, bn->weight));

  VOLT_CHECK_THROWS_CONTAINS(bn(torch::randn({2, 4, 3})), c10::Error,
                             "volt::nn::BatchNormReLU2d: expected a 4-D input (N, C, H, W), got a 3-D tensor");
  VOLT_CHECK_THROWS_CONTAINS(bn(torch::randn({2, 5, 3, 3})), c10::Error,
                             "the input has 5 channels (shape [2, 5, 3, 3]), the module was made for 4");
  volt::nn::BatchNormAddReLU2d add(4);
  VOLT_CHECK_THROWS_CONTAINS(add(torch::randn({2, 4, 3, 3}), torch::randn({2, 4, 3, 2})), c10::Error,
                             "volt::nn::BatchNormAddReLU2d: the residual's shape [2, 4, 3, 2] differs");
  VOLT_CHECK_THROWS_CONTAINS(add(torch::randn({2, 4, 3, 3}), torch::Tensor()), c10::Error,
                             "the residual is an undefined tensor");
  // LibTorch's own check still applies: one value per channel in training.
  CHECK_THROWS_AS(bn(torch::randn({1, 4, 1, 1})), c10::Error);
  VOLT_CHECK_THROWS_CONTAINS(volt::nn::BatchNormReLU2d(0), c10::Error, "num_features must be positive, got 0");
}

TEST_CASE("GPU: BatchNormReLU2d runs cuDNN's fused kernel and matches BatchNorm2d + ReLU within rounding") {
  if (!cuda_here("BatchNormReLU2d on CUDA")) return;
  const auto cl = torch::MemoryFormat::ChannelsLast;
  for (const auto dtype : {torch::kBFloat16, torch::kHalf, torch::kFloat}) {
    const std::string type_name = c10::toString(dtype);
    CAPTURE(type_name);
    torch::nn::BatchNorm2d bn(64);
    volt::nn::BatchNormReLU2d fused(64);
    randomize(bn, 21);
    copy_state(bn, fused);
    bn->to(torch::kCUDA);
    fused->to(torch::kCUDA);
    torch::manual_seed(7);
    const auto x = torch::randn({32, 64, 16, 16}, torch::kCUDA).to(dtype).contiguous(cl);
    const auto dy = torch::randn({32, 64, 16, 16}, torch::kCUDA).to(dtype).contiguous(cl);
    const bool fuses = fused->fuses(x);
    MESSAGE("dtype " << type_name << ": fused " << fuses);
#if defined(VOLT_DETAIL_HAS_CUDNN)
    if (dtype != torch::kFloat) CHECK(fuses);
#endif
    CHECK_FALSE(fused->fuses(x.contiguous()));
    const auto ours = step(x, {}, dy, fused->weight, fused->bias, [&](auto& xi, auto&) { return fused(xi); });
    const auto theirs = step(x, {}, dy, bn->weight, bn->bias, [&](auto& xi, auto&) { return torch::relu(bn(xi)); });
    CHECK((ours.y.scalar_type() == dtype));
    CHECK(ours.y.is_contiguous(cl));
    const double tolerance = dtype == torch::kFloat ? 1e-4 : 1e-2;
    CHECK(relative(ours.y, theirs.y) < tolerance);
    CHECK(relative(ours.dx, theirs.dx) < tolerance);
    CHECK(relative(ours.dweight, theirs.dweight) < tolerance);
    CHECK(relative(ours.dbias, theirs.dbias) < tolerance);
    CHECK(relative(fused->running_mean, bn->running_mean) < 1e-4);
    CHECK(relative(fused->running_var, bn->running_var) < 1e-4);
    CHECK(fused->num_batches_tracked.item<std::int64_t>() == 1);
    fused->eval();
    bn->eval();
    CHECK_FALSE(fused->fuses(x));
    CHECK(torch::equal(fused(x), torch::relu(bn(x))));
  }
}

TEST_CASE("GPU: BatchNormAddReLU2d's fused kernel against a float32 reference of the same inputs") {
  if (!cuda_here("BatchNormAddReLU2d on CUDA")) return;
  const auto cl = torch::MemoryFormat::ChannelsLast;
  for (const auto dtype : {torch::kBFloat16, torch::kHalf}) {
    const std::string type_name = c10::toString(dtype);
    CAPTURE(type_name);
    volt::nn::BatchNormAddReLU2d fused(128);
    torch::nn::BatchNorm2d bn(128);  // the float32 reference
    randomize(fused, 31);
    copy_state(fused, bn);
    fused->to(torch::kCUDA);
    bn->to(torch::kCUDA);
    torch::manual_seed(8);
    const auto x = torch::randn({16, 128, 8, 8}, torch::kCUDA).to(dtype).contiguous(cl);
    const auto z = torch::randn({16, 128, 8, 8}, torch::kCUDA).to(dtype).contiguous(cl);
    const auto dy = torch::randn({16, 128, 8, 8}, torch::kCUDA).to(dtype).contiguous(cl);
#if defined(VOLT_DETAIL_HAS_CUDNN)
    CHECK(fused->fuses(x, z));
#endif
    CHECK_FALSE(fused->fuses(x, z.contiguous()));
    const auto ours = step(x, z, dy, fused->weight, fused->bias, [&](auto& xi, auto& zi) { return fused(xi, zi); });
    // The reference adds in float32 before the ReLU, as the fused kernel does: the same mask.
    const auto theirs = step(x.to(torch::kFloat), z.to(torch::kFloat), dy.to(torch::kFloat), bn->weight, bn->bias,
                             [&](auto& xi, auto& zi) { return torch::relu(bn(xi) + zi); });
    const auto mismatched = ((ours.y > 0) != (theirs.y > 0)).sum().item<std::int64_t>();
    MESSAGE("dtype " << type_name << ": ReLU mask elements that differ from the float32 reference: " << mismatched);
    CHECK(mismatched <= 2);
    CHECK(relative(ours.y, theirs.y) < 1e-2);
    CHECK(relative(ours.dz, theirs.dz) < 1e-2);
    CHECK(relative(ours.dx, theirs.dx) < 2e-2);
    CHECK(relative(ours.dweight, theirs.dweight) < 2e-2);
    CHECK(relative(ours.dbias, theirs.dbias) < 2e-2);
    CHECK(relative(fused->running_mean, bn->running_mean) < 1e-3);
    CHECK(relative(fused->running_var, bn->running_var) < 1e-3);
  }
}

#if VOLT_DETAIL_HAS_CUDA_GRAPHS
TEST_CASE("GPU: the fused modules replay in a captured CUDA graph with the eager results") {
  if (!cuda_here("fused modules in a CUDA graph")) return;
  const auto cl = torch::MemoryFormat::ChannelsLast;
  volt::nn::BatchNormReLU2d bn1(32);
  volt::nn::BatchNormAddReLU2d bn2(32);
  bn1->to(torch::kCUDA);
  bn2->to(torch::kCUDA);
  torch::manual_seed(3);
  auto x = torch::randn({8, 32, 8, 8}, torch::kCUDA).to(torch::kBFloat16).contiguous(cl).requires_grad_(true);
  const auto z = torch::randn({8, 32, 8, 8}, torch::kCUDA).to(torch::kBFloat16).contiguous(cl);
  auto run = [&] {
    x.mutable_grad() = torch::Tensor();
    bn1->weight.mutable_grad() = torch::Tensor();
    auto y = bn2(bn1(x), z);
    y.sum().backward();
    return std::vector<torch::Tensor>{y.detach(), x.grad(), bn1->weight.grad()};
  };
  torch::Tensor mean_before;
  volt_test::check_graph_replay(run, [&] { mean_before = bn1->running_mean.clone(); });
  // The replay updated the running statistics in place, as an eager step does.
  CHECK_FALSE(torch::equal(bn1->running_mean, mean_before));
}
#endif

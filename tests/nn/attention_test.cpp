// volt::nn::functional::split_qkv: the views unbind gives (values, shapes, strides, storage), the same gradient bit
// for bit whichever of q, k, v take part, the projection's version counter, double backward and clear errors; on
// CUDA the same gradient through an attention.
#include <torch/torch.h>

#include <doctest/doctest.h>

#include "nn_test_common.hpp"
#include "test_common.hpp"

#include <volt/volt.hpp>

#include <string>
#include <vector>

using volt_test::cuda_here;
using volt_test::relative;

TEST_CASE("split_qkv gives unbind's views and gradients, bit for bit") {
  torch::manual_seed(13);
  const std::int64_t batch = 3, length = 5, heads = 2, head_size = 4, d = heads * head_size;
  const auto projection = torch::randn({batch, length, 3 * d});
  const auto dq = torch::randn({batch, heads, length, head_size});
  const auto dk = torch::randn({batch, heads, length, head_size});
  const auto dv = torch::randn({batch, heads, length, head_size});
  auto reference_split = [&](const torch::Tensor& t) {
    return t.view({batch, length, 3, heads, head_size}).permute({2, 0, 3, 1, 4}).unbind(0);
  };
  for (const int used : {7, 5, 1}) {  // which of q, k, v take part in the loss (bits 1, 2, 4)
    CAPTURE(used);
    auto a = projection.clone().requires_grad_(true);
    auto b = projection.clone().requires_grad_(true);
    const auto ours = volt::nn::functional::split_qkv(a, heads);
    const auto theirs = reference_split(b);
    const std::vector<torch::Tensor> grads = {dq, dk, dv};
    torch::Tensor loss_a = torch::zeros({}), loss_b = torch::zeros({});
    for (std::size_t i = 0; i < 3; ++i) {
      CHECK(torch::equal(ours[i], theirs[i]));
      CHECK(ours[i].sizes() == theirs[i].sizes());
      CHECK(ours[i].strides() == theirs[i].strides());
      CHECK(ours[i].is_alias_of(a));  // views of the projection's storage, where unbind's are
      CHECK(ours[i].storage_offset() == theirs[i].storage_offset());
      if (used & (1 << i)) {
        loss_a = loss_a + (ours[i] * grads[i]).sum();
        loss_b = loss_b + (theirs[i] * grads[i]).sum();
      }
    }
    loss_a.backward();
    loss_b.backward();
    CHECK(torch::equal(a.grad(), b.grad()));
  }
  // The views share the projection's version counter, as views do: an in-place change is seen.
  auto p = projection.clone().requires_grad_(true);
  auto leaf = p * 1;
  auto [q, k, v] = volt::nn::functional::split_qkv(leaf, heads);
  const auto before = leaf._version();
  {
    torch::NoGradGuard no_grad;
    v.mul_(2);
  }
  CHECK(leaf._version() > before);
  // Double backward through the split.
  auto x = torch::randn({batch, length, 3 * d}, torch::kDouble).requires_grad_(true);
  auto parts = volt::nn::functional::split_qkv(x, heads);
  auto first = torch::autograd::grad({(parts[0] * parts[1]).sum() + parts[2].pow(2).sum()}, {x}, {}, true, true);
  auto second = torch::autograd::grad({first[0].pow(2).sum()}, {x});
  auto y = x.detach().clone().requires_grad_(true);
  auto ref = reference_split(y);
  auto first_ref = torch::autograd::grad({(ref[0] * ref[1]).sum() + ref[2].pow(2).sum()}, {y}, {}, true, true);
  auto second_ref = torch::autograd::grad({first_ref[0].pow(2).sum()}, {y});
  CHECK(torch::allclose(second[0], second_ref[0]));
  // Clear errors.
  CHECK_THROWS_WITH_AS(volt::nn::functional::split_qkv(torch::randn({2, 3, 10}), 2),
                       doctest::Contains("not 3 * heads * head_size for heads=2"), c10::Error);
  CHECK_THROWS_WITH_AS(volt::nn::functional::split_qkv(torch::randn({2, 12}), 2), doctest::Contains("got [2, 12]"),
                       c10::Error);
}

TEST_CASE("GPU: split_qkv's backward against unbind's on CUDA, in a GPT block's attention") {
  if (!cuda_here("split_qkv on CUDA")) return;
  torch::manual_seed(2);
  const std::int64_t heads = 6;
  const auto projection = torch::randn({8, 64, 3 * 384}, torch::kCUDA).to(torch::kBFloat16);
  auto attention = [&](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
    auto scores = torch::matmul(q, k.transpose(-2, -1)) / 8.0;
    return torch::matmul(torch::softmax(scores, -1), v);
  };
  auto a = projection.clone().requires_grad_(true);
  auto b = projection.clone().requires_grad_(true);
  const auto ours = volt::nn::functional::split_qkv(a, heads);
  const auto theirs = b.view({8, 64, 3, heads, 64}).permute({2, 0, 3, 1, 4}).unbind(0);
  const auto dy = torch::randn({8, heads, 64, 64}, torch::kCUDA).to(torch::kBFloat16);
  attention(ours[0], ours[1], ours[2]).backward(dy);
  attention(theirs[0], theirs[1], theirs[2]).backward(dy);
  CHECK(torch::equal(a.grad(), b.grad()));
}

TEST_CASE("GPU: split_qkv's gather kernel: every type, any subset of q/k/v, strided gradients, graph replay") {
  if (!cuda_here("split_qkv's gather kernel")) return;
  using volt::nn::detail::split_qkv_gather;
  using volt::nn::detail::split_qkv_unfusable;
  const std::int64_t batch = 3, length = 37, heads = 4, head_size = 16;
  // What the projection's gradient must be: the three head gradients (zeros for a missing one) in the
  // (batch, length, 3, heads, head_size) layout.
  auto expected = [&](const torch::autograd::variable_list& grads, torch::ScalarType type) {
    std::vector<torch::Tensor> parts;
    for (const auto& g : grads) {
      parts.push_back(g.defined() ? g : torch::zeros({batch, heads, length, head_size}, torch::kCUDA).to(type));
    }
    return torch::stack(parts).permute({1, 3, 0, 2, 4}).reshape({batch, length, 3 * heads * head_size});
  };
  const auto device = torch::ones({1}, torch::kCUDA).device();  // with its index, as a tensor's device has
  for (const auto type : {torch::kBFloat16, torch::kHalf, torch::kFloat}) {
    CAPTURE(static_cast<int>(type));
    torch::manual_seed(21);
    // Head gradients in the attention's own layout and in a (batch, length, heads, head_size) layout seen through
    // a transpose (what an attention kernel that writes in sequence order returns).
    const auto plain = torch::randn({batch, heads, length, head_size}, torch::kCUDA).to(type);
    const auto transposed = torch::randn({batch, length, heads, head_size}, torch::kCUDA).to(type).transpose(1, 2);
    const auto third = torch::randn({batch, heads, length, head_size}, torch::kCUDA).to(type);
    for (const int used : {7, 6, 1, 4, 0}) {
      CAPTURE(used);
      torch::autograd::variable_list grads = {used & 1 ? plain : torch::Tensor(),
                                              used & 2 ? transposed : torch::Tensor(),
                                              used & 4 ? third : torch::Tensor()};
      REQUIRE(split_qkv_unfusable(grads, batch, length, heads, head_size, type, device) == "");
      const auto ours = split_qkv_gather(grads, batch, length, heads, head_size, type, device);
      CHECK(ours.is_contiguous());
      CHECK(torch::equal(ours, expected(grads, type)));
    }
  }
  // What the kernel does not take, with the reason.
  const auto bf16 = torch::TensorOptions().dtype(torch::kBFloat16).device(torch::kCUDA);
  CHECK(split_qkv_unfusable({torch::ones({2, 2, 5, 2}, bf16), {}, {}}, 2, 5, 2, 2, torch::kBFloat16, device) ==
        "head_size is not a multiple of 16 bytes");
  CHECK(split_qkv_unfusable({torch::ones({2, 2, 8, 5}, bf16).transpose(2, 3), {}, {}}, 2, 5, 2, 8,
                            torch::kBFloat16, device) == "a gradient whose last dimension is strided");
  CHECK(split_qkv_unfusable({torch::ones({2, 2, 5, 8}, bf16), {}, {}}, 2, 5, 2, 8, torch::kHalf, device) ==
        "a gradient of another device or type");
#if VOLT_DETAIL_HAS_CUDA_GRAPHS
  // Inside a captured CUDA graph: replay equals the eager steps.
  const auto g = torch::randn({batch, heads, length, head_size}, torch::kCUDA).to(torch::kBFloat16);
  volt_test::check_graph_replay([&] {
    return std::vector<torch::Tensor>{
        split_qkv_gather({g, g * 2, g.neg()}, batch, length, heads, head_size, torch::kBFloat16, device)};
  });
#endif
}

#if defined(VOLT_DETAIL_HAS_RUNTIME_KERNELS)
TEST_CASE("split_qkv's gather kernel compiles with NVRTC (no GPU needed)") {
  if (!volt_test::nvrtc_here()) return;
  std::string error;
  const auto cubin =
      volt::nn::detail::nvrtc_compile(volt::nn::detail::split_qkv_source(), "split_qkv", 90, &error);
  CHECK_MESSAGE(!cubin.empty(), error);
  // Without a GPU the kernel is not used, and says why.
  if (!torch::cuda::is_available()) {
    CHECK(volt::nn::detail::split_qkv_unfusable({}, 1, 1, 1, 8, torch::kFloat, torch::Device(torch::kCPU)) ==
          "not a CUDA tensor");
  }
}
#endif

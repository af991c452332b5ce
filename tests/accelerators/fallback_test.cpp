#include "test_common.hpp"

#include <c10/util/Exception.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace {

/// Builds the c10 errors LibTorch raises, without a device that lacks the operator. (The constructor
/// from a source location exists in every supported LibTorch; the others changed in 2.x.)
c10::SourceLocation here() { return c10::SourceLocation{"volt_test", __FILE__, static_cast<std::uint32_t>(__LINE__)}; }
c10::Error torch_error(const std::string& message) { return c10::Error(here(), message); }
c10::NotImplementedError not_implemented(const std::string& message) { return c10::NotImplementedError(here(), message); }

/// An operator whose backend lacks a kernel for its first call: it throws `error` once, then computes.
template <class Error>
struct MissingOnce {
  explicit MissingOnce(Error missing) : error(std::move(missing)) {}
  Error error;
  int calls = 0;
  std::vector<torch::Device> devices_seen;
  torch::Tensor operator()(const torch::Tensor& input) {
    ++calls;
    devices_seen.push_back(input.device());
    if (calls == 1) throw error;
    return input * 2;
  }
};

}  // namespace

TEST_CASE("is_not_implemented_error recognises LibTorch's missing-kernel errors only") {
  CHECK(volt::is_not_implemented_error(not_implemented("anything")));
  CHECK(volt::is_not_implemented_error(torch_error(
      "The operator 'aten::_linalg_eigh' is not currently implemented for the MPS device. If you want this op to be "
      "added in priority during the prototype phase of this feature, please comment on ...")));
  CHECK(volt::is_not_implemented_error(torch_error(
      "Could not run 'aten::empty_strided' with arguments from the 'MPS' backend. This could be because the operator "
      "doesn't exist for this backend")));
  CHECK(volt::is_not_implemented_error(
      torch_error("Could not run 'aten::_fused_adam_' with arguments from the 'CUDA' backend.")));
  CHECK_FALSE(volt::is_not_implemented_error(torch_error("shape '[2, 3]' is invalid for input of size 5")));
  CHECK_FALSE(volt::is_not_implemented_error(torch_error("Could not run the model")));
  // Some LibTorch builds throw plain std::runtime_error: the message decides.
  CHECK(volt::is_not_implemented_error(std::runtime_error("Could not run 'x' with arguments from the 'MPS' backend.")));
  CHECK_FALSE(volt::is_not_implemented_error(std::runtime_error("shape '[5]' is invalid for input of size 6")));
  CHECK_FALSE(volt::is_not_implemented_error(std::invalid_argument("not implemented")));
}

TEST_CASE("with_cpu_fallback: no error, no rerun") {
  int calls = 0;
  auto result = volt::with_cpu_fallback(
      [&](const torch::Tensor& a, const torch::Tensor& b) {
        ++calls;
        return a + b;
      },
      torch::ones({3}), torch::full({3}, 2.0));
  CHECK(calls == 1);
  CHECK(torch::equal(result, torch::full({3}, 3.0)));
}

TEST_CASE("with_cpu_fallback reruns on the CPU when the operator is not implemented") {
  const torch::Device device = torch::cuda::is_available() ? torch::Device("cuda:0") : torch::Device("cpu");
  CAPTURE(device.str());
  const torch::Tensor input = torch::arange(4, torch::TensorOptions().dtype(torch::kFloat).device(device));

  SUBCASE("c10::NotImplementedError") {
    MissingOnce<c10::NotImplementedError> op{not_implemented("no kernel")};
    const torch::Tensor result = volt::with_cpu_fallback(std::ref(op), input);
    CHECK(op.calls == 2);
    CHECK((op.devices_seen.front() == device));
    CHECK((op.devices_seen.back() == torch::Device("cpu")));  // the rerun saw a CPU copy
    CHECK((result.device() == device));                       // and the result came back
    CHECK(torch::equal(result.cpu(), torch::arange(4, torch::kFloat) * 2));
  }
  SUBCASE("the MPS backend's message") {
    MissingOnce<c10::Error> op{torch_error("The operator 'aten::foo' is not currently implemented for the MPS device.")};
    const torch::Tensor result = volt::with_cpu_fallback(std::ref(op), input);
    CHECK(op.calls == 2);
    CHECK((result.device() == device));
  }
  SUBCASE("the dispatcher's message") {
    MissingOnce<c10::Error> op{torch_error("Could not run 'aten::foo' with arguments from the 'MPS' backend.")};
    volt::with_cpu_fallback(std::ref(op), input);
    CHECK(op.calls == 2);
  }
}

TEST_CASE("with_cpu_fallback lets every other error through") {
  int calls = 0;
  auto shape_error = [&](const torch::Tensor& tensor) -> torch::Tensor {
    ++calls;
    return tensor.view({5});  // a real LibTorch error inside a kernel
  };
  CHECK_THROWS_WITH_AS(volt::with_cpu_fallback(shape_error, torch::ones({2, 3})),
                       doctest::Contains("shape '[5]' is invalid for input of size 6"), std::exception);
  CHECK(calls == 1);
  calls = 0;
  auto user_error = [&](int) -> int {
    ++calls;
    throw std::out_of_range("user code");
  };
  CHECK_THROWS_WITH_AS(volt::with_cpu_fallback(user_error, 1), "user code", std::out_of_range);
  CHECK(calls == 1);
  // An error of the rerun propagates too.
  auto always_missing = [](const torch::Tensor&) -> torch::Tensor { throw not_implemented("still missing"); };
  CHECK_THROWS_AS(volt::with_cpu_fallback(always_missing, torch::ones({1})), c10::NotImplementedError);
}

TEST_CASE("with_cpu_fallback: non-tensor arguments, vectors, tuples and void") {
  const torch::Device device = torch::cuda::is_available() ? torch::Device("cuda:0") : torch::Device("cpu");
  const auto options = torch::TensorOptions().device(device);
  int attempt = 0;
  auto scaled_pair = [&](const std::vector<torch::Tensor>& tensors, double factor,
                         const std::string& label) -> std::tuple<torch::Tensor, torch::Tensor, std::string> {
    if (attempt++ == 0) throw not_implemented("missing");
    CHECK((tensors.at(0).device() == torch::Device("cpu")));
    return {tensors.at(0) * factor, tensors.at(1) * factor, label};
  };
  const std::vector<torch::Tensor> tensors{torch::ones({2}, options), torch::zeros({2}, options)};
  auto [first, second, label] = volt::with_cpu_fallback(scaled_pair, tensors, 3.0, std::string("x"));
  CHECK(attempt == 2);
  CHECK((first.device() == device));
  CHECK((second.device() == device));
  CHECK(torch::equal(first.cpu(), torch::full({2}, 3.0)));
  CHECK(label == "x");

  // An in-place operator's change reaches the original tensor.
  torch::Tensor target = torch::zeros({3}, options);
  int in_place_attempt = 0;
  volt::with_cpu_fallback(
      [&](torch::Tensor& tensor) {
        if (in_place_attempt++ == 0) throw not_implemented("missing");
        tensor.add_(5);
      },
      target);
  CHECK(in_place_attempt == 2);
  CHECK(torch::equal(target.cpu(), torch::full({3}, 5.0)));
  CHECK((target.device() == device));
}

// What the tests of volt::nn share: skipping without a GPU, the relative error against a reference, a body run
// under CUDA autocast, and the check that a training step replayed from a captured CUDA graph gives the eager results.
#pragma once

#include "test_common.hpp"

#include <string>

namespace volt_test {

#if defined(VOLT_DETAIL_HAS_RUNTIME_KERNELS)
/// True when NVRTC can be opened (kernels compile without a GPU); else says why the test is skipped.
inline bool nvrtc_here() {
  const auto& api = volt::nn::detail::runtime_kernel_api();
  if (api.nvrtc_missing.empty()) return true;
  MESSAGE("skipped: " << api.nvrtc_missing);
  return false;
}
#endif

/// The largest absolute difference from the reference, relative to the reference's largest magnitude (in float64).
inline double relative(const torch::Tensor& a, const torch::Tensor& reference) {
  const auto r = reference.to(torch::kDouble);
  const double scale = r.abs().max().item<double>();
  return (a.to(torch::kDouble) - r).abs().max().item<double>() / (scale > 0 ? scale : 1);
}

/// body() with CUDA autocast on in `dtype`; autocast off and its cache cleared afterwards.
template <typename Body>
auto under_cuda_autocast(torch::ScalarType dtype, Body body) {
  volt::compat::set_autocast_dtype(c10::DeviceType::CUDA, dtype);
  volt::compat::set_autocast_enabled(c10::DeviceType::CUDA, true);
  auto result = body();
  volt::compat::set_autocast_enabled(c10::DeviceType::CUDA, false);
  volt::compat::autocast_clear_cache();
  return result;
}

}  // namespace volt_test

#if VOLT_DETAIL_HAS_CUDA_GRAPHS
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cstddef>
#include <functional>
#include <vector>

namespace volt_test {

/// Runs `step` (returning tensors) three times eagerly on a side stream, captures a fourth run in a CUDA graph,
/// zeroes what the capture returned, replays the graph and checks that each result equals the last eager step's
/// bit for bit. `before_capture` runs after the eager steps, before the capture (to note state the replay must
/// change). Returns the eager results.
template <typename Step>
std::vector<torch::Tensor> check_graph_replay(Step step, const std::function<void()>& before_capture = {}) {
  auto side = c10::cuda::getStreamFromPool();
  std::vector<torch::Tensor> eager;
  {
    c10::cuda::CUDAStreamGuard guard(side);
    for (int i = 0; i < 3; ++i) eager = step();
  }
  torch::cuda::synchronize();
  if (before_capture) before_capture();
  at::cuda::CUDAGraph graph;
  std::vector<torch::Tensor> captured;
  {
    c10::cuda::CUDAStreamGuard guard(side);
    graph.capture_begin();
    captured = step();
    graph.capture_end();
  }
  {
    torch::NoGradGuard no_grad;
    for (auto& t : captured) t.zero_();
  }
  graph.replay();
  torch::cuda::synchronize();
  REQUIRE(captured.size() == eager.size());
  for (std::size_t i = 0; i < eager.size(); ++i) {
    CAPTURE(i);
    CHECK(torch::equal(captured[i], eager[i]));
  }
  return eager;
}

}  // namespace volt_test
#endif

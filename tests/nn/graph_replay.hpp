// A check the CUDA tests of volt::nn share: a training step's results equal when the step is replayed from a
// captured CUDA graph.
#pragma once

#include "test_common.hpp"

#if VOLT_DETAIL_HAS_CUDA_GRAPHS
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cstddef>
#include <vector>

namespace volt_test {

/// Runs `step` (returning tensors) three times eagerly on a side stream, captures a fourth run in a CUDA graph,
/// zeroes what the capture returned, replays the graph and checks that each result equals the last eager step's
/// bit for bit. Returns the eager results.
template <typename Step>
std::vector<torch::Tensor> check_graph_replay(Step step) {
  auto side = c10::cuda::getStreamFromPool();
  std::vector<torch::Tensor> eager;
  {
    c10::cuda::CUDAStreamGuard guard(side);
    for (int i = 0; i < 3; ++i) eager = step();
  }
  torch::cuda::synchronize();
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

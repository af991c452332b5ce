// NCCL on two GPUs: the process group's collectives and the gradient reducer, with the two ranks as two threads
// of this process (one GPU each). Skipped without two CUDA devices or without NCCL in this build.
#include "test_common.hpp"

#include "distributed/two_ranks.hpp"

#include <thread>

namespace {

bool two_gpus_with_nccl() {
  if (!volt::distributed_support().nccl) {
    MESSAGE("skipped: this build has no NCCL backend (needs VOLT_WITH_CUDA and nccl.h)");
    return false;
  }
  if (!torch::cuda::is_available() || torch::cuda::device_count() < 2) {
    MESSAGE("skipped: needs 2 CUDA devices, found ", torch::cuda::is_available() ? torch::cuda::device_count() : 0);
    return false;
  }
  return true;
}

template <class Body>
void with_two_gpu_ranks(Body body) {
  const auto errors = volt_test::with_two_ranks(
      [](int rank) { return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(rank)); }, body);
  CHECK(errors[0] == "");
  CHECK(errors[1] == "");
}

}  // namespace

TEST_CASE("ProcessGroup (NCCL, 2 GPUs): all_reduce mean and sum, broadcast, all_gather") {
  if (!two_gpus_with_nccl()) return;
  std::vector<double> mean(2), sum(2), broadcasted(2), second(2);
  with_two_gpu_ranks([&](int rank, volt::ProcessGroup& group) {
    const auto r = static_cast<std::size_t>(rank);
    const auto device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(rank));
    auto t = torch::tensor({static_cast<float>(rank)}, torch::TensorOptions().device(device));
    group.all_reduce(t, volt::ReduceOp::mean);
    mean[r] = t.item<double>();
    auto s = torch::tensor({static_cast<float>(rank + 1)}, torch::TensorOptions().device(device));
    group.all_reduce(s, volt::ReduceOp::sum);
    sum[r] = s.item<double>();
    auto b = torch::tensor({rank == 0 ? 42.0f : -1.0f}, torch::TensorOptions().device(device));
    group.broadcast(b, 0);
    broadcasted[r] = b.item<double>();
    second[r] = group.all_gather(torch::tensor({static_cast<float>(rank) + 0.5f}, torch::TensorOptions().device(device)))[1]
                    .item<double>();
    CHECK(group.backend_name() == "nccl");
  });
  for (std::size_t r = 0; r < 2; ++r) {
    CHECK(mean[r] == doctest::Approx(0.5));
    CHECK(sum[r] == doctest::Approx(3.0));
    CHECK(broadcasted[r] == doctest::Approx(42.0));
    CHECK(second[r] == doctest::Approx(1.5));
  }
}

TEST_CASE("GradientReducer (NCCL, 2 GPUs): averaged gradients equal one process's gradient of the whole batch") {
  if (!two_gpus_with_nccl()) return;
  torch::manual_seed(3);
  auto inputs = torch::randn({8, 5});
  auto targets = torch::randn({8, 2});
  auto make = [] {
    torch::manual_seed(7);
    return torch::nn::Sequential(torch::nn::Linear(5, 16), torch::nn::Tanh(), torch::nn::Linear(16, 2));
  };
  auto reference = make();
  torch::mse_loss(reference->forward(inputs), targets).backward();
  std::vector<std::vector<torch::Tensor>> grads(2);
  with_two_gpu_ranks([&](int rank, volt::ProcessGroup& group) {
    const auto device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(rank));
    auto model = make();
    model->to(device);
    volt::detail::GradientReducer reducer(group, model->parameters(), /*bucket_bytes=*/300);
    reducer.prepare_for_backward(true);
    torch::mse_loss(model->forward(inputs.narrow(0, rank * 4, 4).to(device)), targets.narrow(0, rank * 4, 4).to(device))
        .backward();
    reducer.finish();
    for (auto& p : model->parameters()) grads[static_cast<std::size_t>(rank)].push_back(p.grad().cpu());
  });
  const auto expected = reference->parameters();
  REQUIRE(grads[0].size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    CHECK(torch::allclose(grads[0][i], expected[i].grad(), 1e-5, 1e-6));
    CHECK(torch::equal(grads[0][i], grads[1][i]));
  }
}

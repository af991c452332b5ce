// Runs a test body as ranks 0 and 1 of one process group, the ranks being two threads of this process.
#pragma once

#include <torch/torch.h>

#include <volt/volt.hpp>

#include <chrono>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace volt_test {

/// Calls `body(rank, group)` for ranks 0 and 1, each on the device `device_of(rank)` (a Gloo group on the CPU,
/// NCCL on CUDA devices). Returns each rank's error message ("" when it finished).
inline std::vector<std::string> with_two_ranks(const std::function<torch::Device(int)>& device_of,
                                               const std::function<void(int, volt::ProcessGroup&)>& body) {
  const int port = volt::detail::find_free_port();
  std::vector<std::string> errors(2);
  auto run = [&](int rank) {
    try {
      const torch::Device device = device_of(rank);
      if (device.is_cuda()) volt::CUDA::setup_device(device);
      volt::ClusterEnvironment env;
      env.global_rank = rank;
      env.local_rank = rank;
      env.world_size = 2;
      env.main_port = port;
      volt::ProcessGroup group(env, device, std::chrono::seconds(60));
      body(rank, group);
    } catch (const std::exception& error) {
      errors[static_cast<std::size_t>(rank)] = error.what();
    }
  };
  std::thread other(run, 1);
  run(0);
  other.join();
  return errors;
}

}  // namespace volt_test

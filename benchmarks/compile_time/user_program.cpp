// A small LibTorch training program, compiled with and without `#include <volt/volt.hpp>` by
// benchmarks/compile_time/measure.sh to measure what including volt costs a user's translation unit.
#ifdef WITH_VOLT
#include <volt/volt.hpp>
#else
#include <torch/torch.h>
#endif

int main() {
  torch::nn::Sequential net(torch::nn::Linear(784, 256), torch::nn::ReLU(), torch::nn::Linear(256, 10));
  torch::optim::Adam optimizer(net->parameters(), torch::optim::AdamOptions(1e-3));
  for (int step = 0; step < 10; ++step) {
    auto x = torch::randn({128, 784});
    auto y = torch::randint(0, 10, {128}, torch::kLong);
    optimizer.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(net->forward(x), y);
    loss.backward();
    optimizer.step();
  }
  return 0;
}

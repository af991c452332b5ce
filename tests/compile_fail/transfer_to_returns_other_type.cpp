// `.to(device)` must give back the value's own type (or a reference to it, or nothing): a batch keeps its type.
// expect: returns a type that does not convert to the value's own type
#include <volt/transfer.hpp>

namespace transfer_to_returns_other_type {

struct Wrapped {
  torch::Tensor payload;
#ifndef VOLT_COMPILE_FAIL_CONTROL
  torch::Tensor to(torch::Device device) const { return payload.to(device); }
#else
  Wrapped to(torch::Device device) const { return {payload.to(device)}; }
#endif
};

void use() {
  const std::vector<Wrapped> batch{{torch::ones({1})}};
  (void)volt::batch_to_device(batch, torch::Device(torch::kCPU));
}

}  // namespace transfer_to_returns_other_type

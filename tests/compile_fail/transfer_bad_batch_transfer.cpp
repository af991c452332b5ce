// A volt::batch_transfer specialization without a usable to_device.
// expect: batch_transfer<T> is specialized for this type but has no
#include <volt/transfer.hpp>

struct UserBatch {
  torch::Tensor payload;
};

template <>
struct volt::batch_transfer<UserBatch> {
#ifndef VOLT_COMPILE_FAIL_CONTROL
  static UserBatch to_device(UserBatch batch) { return batch; }  // forgot the device
#else
  static UserBatch to_device(UserBatch batch, torch::Device device) { return {batch.payload.to(device)}; }
#endif
};

int main() { (void)volt::batch_to_device(UserBatch{torch::ones({1})}, torch::Device(torch::kCPU)); }

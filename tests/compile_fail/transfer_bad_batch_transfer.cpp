// A volt::batch_transfer specialization without a usable to_device.
// expect: batch_transfer<T> is specialized for this type but has no
#include <volt/transfer.hpp>

namespace transfer_bad_batch_transfer {
struct UserBatch {
  torch::Tensor payload;
};
}  // namespace transfer_bad_batch_transfer

template <>
struct volt::batch_transfer<transfer_bad_batch_transfer::UserBatch> {
  using UserBatch = transfer_bad_batch_transfer::UserBatch;
#ifndef VOLT_COMPILE_FAIL_CONTROL
  static UserBatch to_device(UserBatch batch) { return batch; }  // forgot the device
#else
  static UserBatch to_device(UserBatch batch, torch::Device device) { return {batch.payload.to(device)}; }
#endif
};

namespace transfer_bad_batch_transfer {

void use() { (void)volt::batch_to_device(UserBatch{torch::ones({1})}, torch::Device(torch::kCPU)); }

}  // namespace transfer_bad_batch_transfer

// A batch value whose only `to` member function cannot take a torch::Device: volt cannot move it.
// expect: member function `to` that cannot be called with a torch::Device
#include <volt/transfer.hpp>

namespace transfer_uncallable_to {

struct WrongTo {
  torch::Tensor payload;
  WrongTo to(int device_index) const { return {payload.to(torch::Device(torch::kCUDA, device_index))}; }
#ifdef VOLT_COMPILE_FAIL_CONTROL
  WrongTo to(torch::Device device) const { return {payload.to(device)}; }
#endif
};

void use() {
  const WrongTo batch{torch::ones({1})};
  (void)volt::batch_to_device(batch, torch::Device(torch::kCPU));
}

}  // namespace transfer_uncallable_to

// volt reflects aggregates of up to volt::reflect::max_fields (32) fields.
// expect: more fields than volt::reflect::max_fields
#include <volt/transfer.hpp>

namespace transfer_too_many_fields {

struct Wide {
  torch::Tensor f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15;
  torch::Tensor f16, f17, f18, f19, f20, f21, f22, f23, f24, f25, f26, f27, f28, f29, f30;
#ifndef VOLT_COMPILE_FAIL_CONTROL
  torch::Tensor f31, f32;
#endif
};

void use() { (void)volt::batch_to_device(Wide{}, torch::Device(torch::kCPU)); }

}  // namespace transfer_too_many_fields

// apply_to_collection keeps the collection's type: the function's result must convert to the leaf's type.
// expect: the function's result must convert to the type of the leaf
#include <volt/core/apply.hpp>

#include <string>
#include <vector>

namespace transfer_apply_result_type {

void use() {
  const std::vector<torch::Tensor> batch{torch::ones({1})};
#ifndef VOLT_COMPILE_FAIL_CONTROL
  (void)volt::apply_to_collection(batch, [](const torch::Tensor& tensor) { return tensor.sizes().vec(); });
#else
  (void)volt::apply_to_collection(batch, [](const torch::Tensor& tensor) { return tensor.flatten(); });
#endif
}

}  // namespace transfer_apply_result_type

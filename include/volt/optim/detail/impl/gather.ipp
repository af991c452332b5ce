/// \file
/// Definitions of the functions declared in volt/optim/detail/gather.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::optim::detail {

VOLT_INLINE bool plain_dense_pair(const at::Tensor& parameter, const at::Tensor& gradient) {
  return parameter.layout() == c10::kStrided && gradient.layout() == c10::kStrided && !gradient.is_sparse() &&
         parameter.is_floating_point() && gradient.scalar_type() == parameter.scalar_type() &&
         gradient.sizes() == parameter.sizes();
}

VOLT_INLINE bool usable_state_tensor(const at::Tensor& state_tensor, const at::Tensor& parameter, CommonDevice& device) {
  return state_tensor.defined() && state_tensor.layout() == c10::kStrided && device.admit(state_tensor) &&
         state_tensor.sizes() == parameter.sizes();
}

VOLT_INLINE bool has_duplicates(std::vector<const c10::TensorImpl*>& impls) {
  std::sort(impls.begin(), impls.end());
  return std::adjacent_find(impls.begin(), impls.end()) != impls.end();
}

VOLT_INLINE bool contiguous_of_dtype(const std::vector<at::Tensor>& tensors, c10::ScalarType dtype) {
  return std::all_of(tensors.begin(), tensors.end(), [dtype](const at::Tensor& tensor) {
    return tensor.scalar_type() == dtype && tensor.is_contiguous();
  });
}

VOLT_INLINE std::vector<at::Scalar> to_scalars(const std::vector<double>& values) {
  return std::vector<at::Scalar>(values.begin(), values.end());
}

VOLT_INLINE bool all_equal(const std::vector<double>& values) {
  return std::adjacent_find(values.begin(), values.end(), std::not_equal_to<>()) == values.end();
}

VOLT_INLINE bool CommonDevice::admit(const at::Tensor& tensor) {
  if (!device_) {
    device_ = tensor.device();
    return true;
  }
  return tensor.device() == *device_;
}

}  // namespace volt::optim::detail

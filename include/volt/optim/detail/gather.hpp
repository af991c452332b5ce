// Shared checks of volt's optimizer steps (volt::optim::detail): which parameters a step updates, whether
// a multi-tensor step may take them, and how LibTorch's per-parameter state is found.
//
// A multi-tensor step must compute exactly what LibTorch's loop computes, so it takes an optimizer only
// when nothing in it could make the two differ: dense floating gradients of the parameter's dtype, one
// device for every parameter and state tensor, no parameter listed twice, state of the optimizer's own
// type. Anything else is left to optimizer.step(), which also raises LibTorch's own errors.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/compat.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

namespace volt::optim::detail {

/// Tracks the one device all tensors of a step must share.
class CommonDevice {
 public:
  /// False when `tensor` is on another device than the tensors seen before it.
  bool admit(const at::Tensor& tensor);
  std::optional<torch::Device> device() const noexcept { return device_; }

 private:
  std::optional<torch::Device> device_;
};

/// Whether LibTorch's loop and a multi-tensor step would treat (parameter, gradient) alike.
VOLT_INLINE bool plain_dense_pair(const at::Tensor& parameter, const at::Tensor& gradient);

/// Whether `state_tensor` is defined, dense, on the common device and shaped like `parameter`.
VOLT_INLINE bool usable_state_tensor(const at::Tensor& state_tensor, const at::Tensor& parameter, CommonDevice& device);

/// True when some TensorImpl occurs twice in `impls` (a parameter in two groups or twice in one):
/// LibTorch's loop would update it twice in sequence, a multi-tensor op once per list entry.
VOLT_INLINE bool has_duplicates(std::vector<const c10::TensorImpl*>& impls);

/// The state of `parameter` in `optimizer` as `State`; nullptr when it has none. Sets `foreign` when it
/// has state of another type (volt then leaves the step to LibTorch).
template <class State>
State* find_state(torch::optim::Optimizer& optimizer, const at::Tensor& parameter, bool& foreign) {
  auto& states = optimizer.state();
  const auto found = states.find(compat::optimizer_state_key(parameter));
  if (found == states.end()) return nullptr;
  auto* state = dynamic_cast<State*>(found->second.get());
  if (state == nullptr) foreign = true;
  return state;
}

/// Stores `state` as the state of `parameter` and returns it.
template <class State>
State* insert_state(torch::optim::Optimizer& optimizer, const at::Tensor& parameter, std::unique_ptr<State> state) {
  State* raw = state.get();
  optimizer.state()[compat::optimizer_state_key(parameter)] = std::move(state);
  return raw;
}

/// Whether all `tensors` are contiguous and of `dtype` (what LibTorch's fused kernels take).
VOLT_INLINE bool contiguous_of_dtype(const std::vector<at::Tensor>& tensors, c10::ScalarType dtype);

/// `std::vector<at::Scalar>` from doubles, for the ScalarList overloads of the foreach ops.
VOLT_INLINE std::vector<at::Scalar> to_scalars(const std::vector<double>& values);

/// True when every value in `values` equals the first (one Scalar can then serve all tensors).
VOLT_INLINE bool all_equal(const std::vector<double>& values);

}  // namespace volt::optim::detail

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/optim/detail/impl/gather.ipp>
#endif

/// \file
/// Fabric's collectives in Lightning Fabric's terms, over any strategy's run time
/// (volt::StrategyRuntimeInterface); implementation of volt::Fabric, no public API.
///
/// Lightning's SingleDeviceStrategy hands a collective's input back as it is (the same tensor, any type for
/// broadcast); the DDP family returns new tensors (all_gather stacks them along a new first dimension). The
/// functions below keep that difference, which is one of the Lightning API, not of the strategy's run time.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/strategies/compatibility.hpp>
#include <volt/strategies/strategy.hpp>

#include <torch/torch.h>

#include <set>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

namespace volt::detail {

/// Whether Fabric's collectives under `Strategy` hand their input back (Lightning's SingleDeviceStrategy)
/// rather than return what the processes computed together.
template <class Strategy>
inline constexpr bool fabric_collectives_return_input = !is_distributed_strategy<Strategy>();

/// The ReduceOp of Lightning Fabric's op name: "sum", "max", "min", "product", and the mean for "mean" and
/// "avg". Throws std::invalid_argument for any other name.
VOLT_INLINE ReduceOp fabric_reduce_op(const std::string& op);

/// Fabric::all_reduce of `tensor` (already on the runtime's device): `tensor` itself, or a new tensor reduced
/// over the processes (`tensor` is not changed).
template <class Strategy, class Runtime>
torch::Tensor fabric_all_reduce(Runtime& runtime, const torch::Tensor& tensor, ReduceOp op) {
  if constexpr (fabric_collectives_return_input<Strategy>) {
    return tensor;
  } else {
    auto result = tensor.clone();
    runtime.all_reduce(result, op);
    return result;
  }
}

/// Fabric::all_gather of `tensor` (already on the runtime's device): `tensor` itself, or every rank's tensor
/// stacked along a new first dimension of size world_size().
template <class Strategy, class Runtime>
torch::Tensor fabric_all_gather(Runtime& runtime, const torch::Tensor& tensor) {
  if constexpr (fabric_collectives_return_input<Strategy>) {
    return tensor;
  } else {
    return torch::stack(runtime.all_gather(tensor));
  }
}

/// Fabric::broadcast: `value` itself, or rank `src`'s value on every rank, for tensors (same shape and dtype
/// on every rank; the result is on the runtime's device), arithmetic values (sent as a float64, so integers
/// beyond 2^53 lose precision) and strings; other types do not compile.
template <class Strategy, class Runtime, class T>
T fabric_broadcast(Runtime& runtime, T value, int src) {
  if constexpr (fabric_collectives_return_input<Strategy>) {
    return value;
  } else {
    const auto device = runtime.root_device();
    if constexpr (std::is_same_v<std::remove_cvref_t<T>, torch::Tensor>) {
      auto result = value.to(device).clone();
      runtime.broadcast(result, src);
      return result;
    } else if constexpr (std::is_arithmetic_v<T>) {
      auto tensor =
          torch::tensor({static_cast<double>(value)}, torch::TensorOptions().dtype(torch::kDouble).device(device));
      runtime.broadcast(tensor, src);
      return static_cast<T>(tensor.cpu().template item<double>());
    } else if constexpr (std::is_same_v<std::remove_cvref_t<T>, std::string>) {
      return broadcast_string(runtime, value, src);
    } else {
      static_assert(std::is_same_v<T, torch::Tensor>,
                    "volt::Fabric::broadcast with DDP supports torch::Tensor, arithmetic values and std::string");
      return value;
    }
  }
}

/// What Fabric::no_backward_sync returns: while it lives, backward() leaves the gradients local (no
/// all-reduce); its destructor restores the previous setting (guards nest). With one process there is nothing
/// to skip and the guard changes nothing that can be seen.
class NoBackwardSyncGuard {
 public:
  /// Skips gradient synchronisation from now on when `enabled`; remembers the previous setting either way.
  NoBackwardSyncGuard(bool* flag, bool enabled);
  ~NoBackwardSyncGuard() { *flag_ = previous_; }
  NoBackwardSyncGuard(const NoBackwardSyncGuard&) = delete;
  NoBackwardSyncGuard& operator=(const NoBackwardSyncGuard&) = delete;

 private:
  bool* flag_;
  bool previous_;
};

}  // namespace volt::detail

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/fabric/impl/collectives.ipp>
#endif

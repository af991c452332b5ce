/// \file
/// volt::batch_to_device: Lightning's move_data_to_device for any C++ batch.
///
/// One call moves every tensor of a nested batch (containers, tuples, optionals, variants, aggregate structs,
/// torch::data::Example, c10 containers) to a device and returns the batch with its type unchanged. The walk
/// is volt::apply_to_collection's recursion with the leaves Lightning moves: tensors, modules, and any value
/// with a `.to(device)` member, plus user types taught through volt::batch_transfer.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/apply.hpp>

#include <torch/torch.h>

#include <concepts>
#include <memory>
#include <type_traits>
#include <utility>

namespace volt {

/// Customization point: specialize for a type to decide how batch_to_device moves it. The specialization wins
/// over every built-in rule (tensors, `.to` members, structural recursion), and must provide
///
///     static T to_device(T value, torch::Device device);   // any parameter form callable with T
///
/// returning the moved value (or something convertible to T). Inside, call volt::batch_to_device on the parts
/// that should move the usual way. The primary template is empty: volt ignores it.
template <class Value>
struct batch_transfer {
  using volt_primary_batch_transfer = void;  ///< Marks the primary template ("not specialized").
};

/// Whether batch_to_device passes non_blocking=true when it copies a tensor to `device`: for every device type
/// except CPU and MPS, as Lightning does (non-blocking copies to MPS race, PyTorch issue 83015; to the CPU
/// they would hand back memory before the copy finished). Values with their own `.to` never get it.
VOLT_INLINE bool transfer_is_non_blocking(torch::Device device) noexcept;

namespace detail {

template <class Value>
concept has_batch_transfer = !requires { typename batch_transfer<Value>::volt_primary_batch_transfer; };

template <class Value>
concept module_holder = requires { typename Value::ContainedType; } &&
                        std::is_base_of_v<torch::nn::ModuleHolder<typename Value::ContainedType>, Value>;

template <class Value>
concept module_pointer =
    is_specialization_of<Value, std::shared_ptr> && std::is_base_of_v<torch::nn::Module, typename Value::element_type>;

template <class Value>
concept has_lvalue_device_to = requires(Value& value, torch::Device device) { value.to(device); };

template <class Value>
concept has_rvalue_device_to = requires(Value&& value, torch::Device device) { std::move(value).to(device); };

template <class Value>
concept has_const_device_to = requires(const Value& value, torch::Device device) { value.to(device); };

template <class Value>
concept has_device_to = has_lvalue_device_to<Value> || has_rvalue_device_to<Value>;

// The `.to` calls that give a new value (rather than changing the object in place and returning nothing).
template <class Value>
concept rvalue_device_to_returns = has_rvalue_device_to<Value> &&
    !std::is_void_v<decltype(std::declval<Value&&>().to(std::declval<torch::Device>()))>;

template <class Value>
concept const_device_to_returns = has_const_device_to<Value> &&
    !std::is_void_v<decltype(std::declval<const Value&>().to(std::declval<torch::Device>()))>;

// One non-template member function named `to`: clearly meant to move the value, so if it cannot take a
// device that is a mistake worth a compile error. An overloaded or template `to` (c10::Scalar::to<T>(),
// c10::IValue::to<T>() are conversions) or a data member named `to` is not, and such values pass through.
template <class Value>
concept has_single_to_member_function =
    requires { &Value::to; } && std::is_member_function_pointer_v<decltype(&Value::to)>;

// A `.to` that returns a reference to the object it was called on, where we own that object, lets us move
// the object instead of copying it.
template <class Value, class Result>
Value adopt_to_result(Result&& result, Value* owned_source) {
  static_assert(std::is_convertible_v<Result&&, Value>,
                "volt::batch_to_device: this value's .to(torch::Device) returns a type that does not convert to the "
                "value's own type; a batch keeps its type, so return the value (or a reference to it, or nothing), "
                "or specialize volt::batch_transfer for it");
  if constexpr (std::is_lvalue_reference_v<Result> && std::is_same_v<std::remove_cvref_t<Result>, Value>) {
    if (owned_source != nullptr && std::addressof(result) == owned_source) return std::move(*owned_source);
  }
  return std::forward<Result>(result);
}

// The visitor of rebuild_collection that defines batch_to_device's leaves and what happens to them.
struct device_transfer_visitor {
  torch::Device device;
  bool tensor_non_blocking;

  template <class Value>
  static constexpr bool is_leaf = has_batch_transfer<Value> || std::is_same_v<Value, at::Tensor> ||
                                  module_holder<Value> || module_pointer<Value> || has_device_to<Value> ||
                                  has_single_to_member_function<Value>;

  template <class Leaf>
  std::remove_cvref_t<Leaf> visit(Leaf&& leaf) const {
    using Value = std::remove_cvref_t<Leaf>;
    if constexpr (has_batch_transfer<Value>) {
      static_assert(
          requires {
            { batch_transfer<Value>::to_device(std::forward<Leaf>(leaf), device) } -> std::convertible_to<Value>;
          },
          "volt::batch_transfer<T> is specialized for this type but has no `static T to_device(T, torch::Device)` "
          "callable with it (returning T or something convertible to T)");
      return batch_transfer<Value>::to_device(std::forward<Leaf>(leaf), device);
    } else if constexpr (std::is_same_v<Value, at::Tensor>) {
      return move_tensor(std::forward<Leaf>(leaf));
    } else if constexpr (module_holder<Value>) {
      // Copies of a holder share the module: like Lightning, the module itself is moved, in place.
      Value holder = std::forward<Leaf>(leaf);
      if (!holder.is_empty()) holder->to(device);
      return holder;
    } else if constexpr (module_pointer<Value>) {
      Value pointer = std::forward<Leaf>(leaf);
      if (pointer != nullptr) pointer->to(device);
      return pointer;
    } else {
      static_assert(has_device_to<Value>,
                    "volt::batch_to_device: this value has a member function `to` that cannot be called with a "
                    "torch::Device; give it a `to(torch::Device)` overload, or specialize volt::batch_transfer "
                    "for its type");
      return call_member_to(std::forward<Leaf>(leaf));
    }
  }

 private:
  // Same device: the same tensor (same TensorImpl), without LibTorch's dispatch, as `.to` would return it.
  // Undefined tensors (C++'s None) are kept: LibTorch's `.to` would throw on them.
  template <class Leaf>
  at::Tensor move_tensor(Leaf&& tensor) const {
    if (!tensor.defined() || tensor.device() == device) return std::forward<Leaf>(tensor);
    return tensor.to(at::TensorOptions().device(device), tensor_non_blocking);
  }

  // Lightning calls `.to(device)` on the object itself. A C++ lvalue argument stays untouched: a `.to` that
  // can only run on a mutable object runs on our copy (or on the rvalue the caller gave up). A `.to` that
  // returns nothing moved the object in place, which is what is kept (Lightning keeps the object too).
  template <class Leaf>
  std::remove_cvref_t<Leaf> call_member_to(Leaf&& leaf) const {
    using Value = std::remove_cvref_t<Leaf>;
    constexpr bool caller_gave_it_up =
        !std::is_lvalue_reference_v<Leaf> && !std::is_const_v<std::remove_reference_t<Leaf>>;
    if constexpr (caller_gave_it_up && rvalue_device_to_returns<Value>) {
      return adopt_to_result<Value>(std::move(leaf).to(device), std::addressof(leaf));
    } else if constexpr (const_device_to_returns<Value>) {
      return adopt_to_result<Value>(std::as_const(leaf).to(device), nullptr);
    } else {
      Value own = std::forward<Leaf>(leaf);
      if constexpr (has_lvalue_device_to<Value>) {
        if constexpr (std::is_void_v<decltype(own.to(device))>) {
          own.to(device);
          return own;
        } else {
          return adopt_to_result<Value>(own.to(device), std::addressof(own));
        }
      } else if constexpr (std::is_void_v<decltype(std::move(own).to(device))>) {
        std::move(own).to(device);
        return own;
      } else {
        return adopt_to_result<Value>(std::move(own).to(device), std::addressof(own));
      }
    }
  }
};

}  // namespace detail

/// Lightning's move_data_to_device: returns `batch`, with its type unchanged, with every tensor inside moved
/// to `device`. Walks the batch like volt::apply_to_collection (see there for the containers recursed into);
/// the first rule that matches a value decides:
/// 1. a volt::batch_transfer<T> specialization: its to_device(value, device);
/// 2. torch::Tensor: `.to(device)`, with non_blocking as transfer_is_non_blocking(device) says; a tensor
///    already on `device` (same type and index), or undefined, is returned as is (same TensorImpl, no copy);
/// 3. a module holder (torch::nn::Linear, ...) or std::shared_ptr to a torch::nn::Module: the module is moved
///    in place with `->to(device)` and the same holder is returned;
/// 4. any value with a member `.to` callable with a torch::Device (so an aggregate with `.to` is not recursed
///    into): `.to(device)` without non_blocking; its result replaces the value, or, when it returns nothing, the
///    value it was called on is kept. A single non-template member function `to` that cannot take a device is a
///    compile error; an overloaded or template `to`, or a data member named `to`, is ignored;
/// 5. structural recursion (containers, tuples, optionals, variants, aggregates, ...);
/// 6. everything else (numbers, strings, sets, std::nullopt, std::monostate, unknown types) is returned as is.
/// An rvalue batch is moved from (its containers are reused, nothing is copied); an lvalue batch is left
/// unchanged, except modules (shared by their holders), which move in place as in Lightning.
template <class Batch>
std::remove_cvref_t<Batch> batch_to_device(Batch&& batch, torch::Device device) {
  const detail::device_transfer_visitor visitor{device, transfer_is_non_blocking(device)};
  return detail::rebuild_collection(std::forward<Batch>(batch), visitor);
}

}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/transfer/impl/batch_to_device.ipp>
#endif

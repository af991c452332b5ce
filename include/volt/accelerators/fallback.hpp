/// \file
/// volt::with_cpu_fallback: run one operator on the CPU when the accelerator's backend lacks it.
///
/// LibTorch's MPS backend does not implement every operator. For a whole program, set
/// PYTORCH_ENABLE_MPS_FALLBACK=1 in the environment before the process starts (LibTorch then runs missing
/// MPS operators on the CPU, as PyTorch does). For one call site, wrap the call:
///
/// ```
///   auto y = volt::with_cpu_fallback([](const torch::Tensor& x) { return torch::special_i1(x); }, x);
/// ```
#pragma once

#include <volt/core/linkage.hpp>
#include <torch/torch.h>

#include <c10/util/Exception.h>

#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace volt {

/// Whether `error` is LibTorch reporting an operator without a kernel for a backend (as opposed to a
/// failure inside a kernel): c10::NotImplementedError, or an error whose message says "... is not currently
/// implemented for the MPS device ..." or "Could not run '<op>' with arguments from the '<backend>' backend".
/// The messages are matched on any std::exception because LibTorch builds differ in the type they throw
/// (Debian's 1.13 throws some TORCH_CHECK failures as plain std::runtime_error).
VOLT_INLINE bool is_not_implemented_error(const std::exception& error);

namespace detail {

template <class T>
struct is_tensor_vector : std::false_type {};
template <>
struct is_tensor_vector<std::vector<torch::Tensor>> : std::true_type {};

/// One argument of the CPU rerun: tensors (also in a std::vector or std::optional) become CPU copies
/// that remember their original, other arguments are passed through by reference.
template <class Arg>
class CpuArgument {
 public:
  explicit CpuArgument(Arg& argument) : argument_(argument) {}
  Arg& get() { return argument_; }
  void copy_back_if_modified() {}

 private:
  Arg& argument_;
};

template <class Arg>
  requires std::same_as<std::remove_cv_t<Arg>, torch::Tensor>
class CpuArgument<Arg> {
 public:
  explicit CpuArgument(Arg& argument)
      : original_(argument), copy_(argument.defined() ? argument.to(torch::kCPU) : argument),
        version_(copy_.defined() ? copy_._version() : 0) {}
  torch::Tensor& get() { return copy_; }
  // An in-place operator changed the CPU copy: write the change to the original tensor.
  void copy_back_if_modified() {
    if (!copy_.defined() || copy_.is_same(original_) || copy_._version() == version_) return;
    torch::NoGradGuard no_grad;
    original_.copy_(copy_);
  }

 private:
  Arg& original_;
  torch::Tensor copy_;
  std::int64_t version_;
};

template <class Arg>
  requires is_tensor_vector<std::remove_cv_t<Arg>>::value
class CpuArgument<Arg> {
 public:
  explicit CpuArgument(Arg& argument) {
    for (auto& tensor : argument) arguments_.emplace_back(tensor);
    for (auto& argument_copy : arguments_) copies_.push_back(argument_copy.get());
  }
  std::vector<torch::Tensor>& get() { return copies_; }
  void copy_back_if_modified() {
    for (auto& argument_copy : arguments_) argument_copy.copy_back_if_modified();
  }

 private:
  std::vector<CpuArgument<std::remove_reference_t<decltype(*std::declval<Arg&>().begin())>>> arguments_;
  std::vector<torch::Tensor> copies_;
};

VOLT_INLINE void note_device(std::optional<torch::Device>& found, const torch::Tensor& tensor);
template <class Arg>
void note_device(std::optional<torch::Device>& found, const Arg& argument) {
  if constexpr (std::is_same_v<Arg, torch::Tensor>) {
    note_device(found, argument);
  } else if constexpr (is_tensor_vector<Arg>::value) {
    for (const auto& tensor : argument) note_device(found, tensor);
  }
}

template <class Result>
Result to_device(Result result, torch::Device device) {
  if constexpr (std::is_same_v<Result, torch::Tensor>) {
    return result.defined() ? result.to(device) : result;
  } else if constexpr (is_tensor_vector<Result>::value) {
    for (auto& tensor : result) tensor = to_device(std::move(tensor), device);
    return result;
  } else if constexpr (requires { std::tuple_size<Result>::value; }) {
    std::apply([&](auto&... elements) { ((elements = to_device(std::move(elements), device)), ...); }, result);
    return result;
  } else {
    return result;
  }
}

}  // namespace detail

/// Calls `op(args...)`. If LibTorch reports the operator as not implemented for the backend
/// (is_not_implemented_error), calls it again with every tensor argument (also inside a
/// std::vector<torch::Tensor>) copied to the CPU, copies arguments that the operator changed in place
/// back to their devices, and moves tensor results (a tensor, a vector or a tuple of them) back to the
/// device of the first tensor argument. Any other exception propagates, as does an error of the rerun.
/// Arguments are passed as lvalues (they may be used twice); the result is returned by value.
template <class Op, class... Args>
auto with_cpu_fallback(Op&& op, Args&&... args) -> std::decay_t<std::invoke_result_t<Op&, Args&...>> {
  using Result = std::decay_t<std::invoke_result_t<Op&, Args&...>>;
  try {
    return std::invoke(op, args...);
  } catch (const std::exception& error) {
    if (!is_not_implemented_error(error)) throw;
  }
  std::optional<torch::Device> home;
  (detail::note_device(home, std::as_const(args)), ...);
  std::tuple<detail::CpuArgument<std::remove_reference_t<Args>>...> cpu_arguments{
      detail::CpuArgument<std::remove_reference_t<Args>>(args)...};
  if constexpr (std::is_void_v<Result>) {
    std::apply([&](auto&... cpu) { std::invoke(op, cpu.get()...); }, cpu_arguments);
    std::apply([](auto&... cpu) { (cpu.copy_back_if_modified(), ...); }, cpu_arguments);
  } else {
    Result result = std::apply([&](auto&... cpu) -> Result { return std::invoke(op, cpu.get()...); }, cpu_arguments);
    std::apply([](auto&... cpu) { (cpu.copy_back_if_modified(), ...); }, cpu_arguments);
    return home ? detail::to_device(std::move(result), *home) : result;
  }
}

}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/accelerators/impl/fallback.ipp>
#endif

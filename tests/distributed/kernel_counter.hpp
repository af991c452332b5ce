// Counts the ATen operators a thread calls that do work on a device (what would be a kernel launch on a GPU),
// so a test can bound the per-step work of the DDP machinery on the CPU.
#pragma once

#include <torch/torch.h>

#include <ATen/record_function.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace volt_test {

/// While alive, counts this thread's top-level ATen operator calls (not those an operator makes inside itself),
/// leaving out the ones that only make views or allocate (no kernel). One counter per thread at a time.
/// Autograd's engine runs a CPU backward pass on the calling thread, so its operators are seen too.
class KernelCounter {
 public:
  KernelCounter() {
    state() = {};
    handle_ = at::addThreadLocalCallback(
        at::RecordFunctionCallback(&enter, &leave).scopes({at::RecordScope::FUNCTION}));
  }
  ~KernelCounter() { at::removeCallback(handle_); }
  KernelCounter(const KernelCounter&) = delete;
  KernelCounter& operator=(const KernelCounter&) = delete;

  /// The operators counted since the last take(), in call order; resets the count.
  std::vector<std::string> take() {
    auto names = std::move(state().names);
    state().names.clear();
    return names;
  }

 private:
  struct State {
    int depth = 0;
    std::vector<std::string> names;
  };
  static State& state() {
    thread_local State current;
    return current;
  }
  static bool launches_nothing(std::string_view name) {
    constexpr std::string_view free[] = {
        "aten::view",   "aten::reshape",   "aten::_reshape_alias", "aten::narrow",     "aten::slice",
        "aten::as_strided", "aten::empty", "aten::empty_like",     "aten::empty_strided", "aten::detach",
        "aten::alias",  "aten::_unsafe_view", "aten::resize_",     "aten::expand",     "aten::t",
        "aten::transpose", "aten::select", "aten::flatten",        "aten::unsqueeze",  "aten::squeeze",
        "aten::permute", "aten::lift_fresh", "aten::detach_"};
    for (auto item : free) {
      if (item == name) return true;
    }
    return false;
  }
  // Only ATen operators nest: the engine's records around each backward node ("autograd::engine::
  // evaluate_function: ...", which also holds the node's hooks) and Tensor::backward (aten::_backward in some
  // versions) are looked through, so the operators of a backward pass and of its hooks count as top-level.
  static bool looked_through(std::string_view name) {
    return name.substr(0, 6) != "aten::" || name == "aten::_backward";
  }
  static std::unique_ptr<at::ObserverContext> enter(const at::RecordFunction& call) {
    auto& current = state();
    if (looked_through(call.name())) return nullptr;
    if (current.depth++ == 0 && !launches_nothing(call.name())) current.names.emplace_back(call.name());
    return nullptr;
  }
  static void leave(const at::RecordFunction& call, at::ObserverContext* /*context*/) {
    if (!looked_through(call.name())) --state().depth;
  }

  at::CallbackHandle handle_;
};

}  // namespace volt_test

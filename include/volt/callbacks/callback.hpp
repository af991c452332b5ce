/// \file
/// Callbacks: plain values whose member hooks the Trainer finds at compile time.
///
/// A callback is any copyable or movable type. It implements only the hooks it needs (the hook table,
/// volt/callbacks/hooks.hpp, lists them with their parameters), each taking the Trainer's state first
/// (`volt::TrainerState&`, or a template parameter); a hook that returns bool asks the Trainer to stop when it
/// returns true. Hooks it does not define cost nothing: the Trainer keeps, per hook, a list of just the
/// callbacks that define it. Callbacks run on every rank; those that write files check `state.is_global_zero`.
///
/// ```
///   struct PrintEpochs {
///     void on_train_epoch_end(volt::TrainerState& state) { std::cout << state.current_epoch << '\n'; }
///   };
///   volt::Trainer<> trainer({.max_epochs = 3}, PrintEpochs{});
/// ```
///
/// Each hook runs where Lightning runs the callback hook of the same name. Besides the hooks, a callback may
/// store its own state in checkpoints with `save_state(torch::serialize::OutputArchive&) const` and
/// `load_state(torch::serialize::InputArchive&)`, and change a full checkpoint being written or read with
/// `on_save_checkpoint(volt::CheckpointSave&)` and `on_load_checkpoint(volt::CheckpointLoad&)` (Lightning's
/// hooks of those names; volt::WeightAveraging replaces the checkpoint's model entry). A hook may throw: the
/// exception reaches the caller of fit() with the epoch and batch index added to its message, after
/// on_exception and teardown ran (see volt::Trainer::fit).
#pragma once

#include <volt/callbacks/hooks.hpp>
#include <volt/serialization/checkpoint_hooks.hpp>

#include <torch/torch.h>

#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

namespace volt::detail {

/// Marks hook arguments a callback does not use as used.
template <class... Arguments>
constexpr void unused_hook_arguments(const Arguments&... /*arguments*/) {}

/// A callback behind one virtual function per hook of the table, with a record of which hooks its type
/// defines. `State` is the host's state type, passed first to every hook.
template <class State>
class AnyCallback {
 public:
  virtual ~AnyCallback() = default;
  /// Whether the callback's type defines `hook`.
  virtual bool has(Hook hook) const = 0;
  /// The callback type's mangled name (its identity in checkpoints).
  virtual std::string_view type_name() const = 0;
  /// The callback when it is of `type`, else nullptr.
  virtual void* get(const std::type_info& type) = 0;
  /// Writes the callback's own state (nothing when it has no save_state).
  virtual void save_state(torch::serialize::OutputArchive& archive) const = 0;
  /// Reads the callback's own state (nothing when it has no load_state).
  virtual void load_state(torch::serialize::InputArchive& archive) = 0;
  /// A full checkpoint being written (nothing when it has no on_save_checkpoint).
  virtual void on_save_checkpoint(CheckpointSave& checkpoint) = 0;
  /// A checkpoint being resumed from, before load_state (nothing when it has no on_load_checkpoint).
  virtual void on_load_checkpoint(CheckpointLoad& checkpoint) = 0;

#define VOLT_DETAIL_HOOK_VIRTUAL(name, owner, parameters, arguments) \
  virtual void name(State& state VOLT_DETAIL_UNPAREN parameters) = 0;
  VOLT_DETAIL_HOOKS(VOLT_DETAIL_HOOK_VIRTUAL)
#undef VOLT_DETAIL_HOOK_VIRTUAL
};

/// AnyCallback for a callback of type C: each virtual calls C's hook of that name when C has it (a true result
/// of a bool hook sets state.should_stop), and does nothing otherwise.
template <class C, class State>
class CallbackModel final : public AnyCallback<State> {
 public:
  /// Takes the callback by value.
  explicit CallbackModel(C callback) : callback_(std::move(callback)) {}

  bool has(Hook hook) const override { return defined[static_cast<std::size_t>(hook)]; }
  std::string_view type_name() const override { return typeid(C).name(); }
  void* get(const std::type_info& type) override { return type == typeid(C) ? &callback_ : nullptr; }
  void save_state(torch::serialize::OutputArchive& archive) const override {
    if constexpr (requires(const C& c) { c.save_state(archive); }) callback_.save_state(archive);
  }
  void load_state(torch::serialize::InputArchive& archive) override {
    if constexpr (requires(C& c) { c.load_state(archive); }) callback_.load_state(archive);
  }
  void on_save_checkpoint(CheckpointSave& checkpoint) override {
    if constexpr (requires(C& c) { c.on_save_checkpoint(checkpoint); }) callback_.on_save_checkpoint(checkpoint);
  }
  void on_load_checkpoint(CheckpointLoad& checkpoint) override {
    if constexpr (requires(C& c) { c.on_load_checkpoint(checkpoint); }) callback_.on_load_checkpoint(checkpoint);
  }

#define VOLT_DETAIL_HOOK_OVERRIDE(name, owner, parameters, arguments)                                     \
  void name(State& state VOLT_DETAIL_UNPAREN parameters) override {                                       \
    if constexpr (defined[static_cast<std::size_t>(Hook::name)]) {                                        \
      if constexpr (std::is_same_v<decltype(callback_.name(state VOLT_DETAIL_UNPAREN arguments)), bool>) { \
        if (callback_.name(state VOLT_DETAIL_UNPAREN arguments)) state.should_stop = true;                \
      } else {                                                                                            \
        callback_.name(state VOLT_DETAIL_UNPAREN arguments);                                              \
      }                                                                                                   \
    } else {                                                                                              \
      unused_hook_arguments(state VOLT_DETAIL_UNPAREN arguments);                                         \
    }                                                                                                     \
  }
  VOLT_DETAIL_HOOKS(VOLT_DETAIL_HOOK_OVERRIDE)
#undef VOLT_DETAIL_HOOK_OVERRIDE

  /// Which hooks of the table C defines as a callback hook.
  static constexpr std::array<bool, hook_count> defined{
#define VOLT_DETAIL_HOOK_DEFINED(name, owner, parameters, arguments)                                          \
  callback_hook(Hook::name) &&                                                                               \
      requires(C& callback, State& state VOLT_DETAIL_UNPAREN parameters) {                                   \
        callback.name(state VOLT_DETAIL_UNPAREN arguments);                                                  \
      },
      VOLT_DETAIL_HOOKS(VOLT_DETAIL_HOOK_DEFINED)
#undef VOLT_DETAIL_HOOK_DEFINED
  };

 private:
  C callback_;
};

/// Runs hook `H` of a callback list: calls the list's run_<hook>.
template <Hook H>
struct CallbackRun;
#define VOLT_DETAIL_HOOK_DISPATCH(name, owner, parameters, arguments) \
  template <>                                                         \
  struct CallbackRun<Hook::name> {                                    \
    template <class List, class... Arguments>                         \
    static void call(const List& list, Arguments&... args) {          \
      list.run_##name(args...);                                       \
    }                                                                 \
  };
VOLT_DETAIL_HOOKS(VOLT_DETAIL_HOOK_DISPATCH)
#undef VOLT_DETAIL_HOOK_DISPATCH

/// A host's callbacks, with one list per hook of just the callbacks that define it.
template <class State>
class CallbackList {
 public:
  /// Adds `callback` after the others.
  template <class C>
  void add(C callback) {
    add_erased(std::make_unique<CallbackModel<std::remove_cvref_t<C>, State>>(std::move(callback)));
  }
  /// Adds a type-erased callback after the others.
  void add_erased(std::unique_ptr<AnyCallback<State>> callback);

  /// The first callback of type C, or nullptr.
  template <class C>
  C* find() {
    for (auto& callback : all_) {
      if (void* found = callback->get(typeid(C))) return static_cast<C*>(found);
    }
    return nullptr;
  }
  /// How many callbacks are of type C.
  template <class C>
  std::size_t count() const {
    std::size_t n = 0;
    for (const auto& callback : all_) n += callback->get(typeid(C)) != nullptr;
    return n;
  }

  /// The callbacks that define `hook`, in order.
  const std::vector<AnyCallback<State>*>& with(Hook hook) const { return by_hook_[static_cast<std::size_t>(hook)]; }

  /// Calls hook `H` of every callback that defines it, in order (through run_<hook>, one function per hook).
  template <Hook H, class... Arguments>
  void run(State& state, Arguments&&... args) const {
    static_assert(callback_hook(H), "volt: this hook is a model hook only (see the owner column of VOLT_DETAIL_HOOKS)");
    CallbackRun<H>::call(*this, state, args...);
  }

  // One function per hook, defined once below (not for each place that runs the hook).
#define VOLT_DETAIL_HOOK_RUN_DECLARATION(name, owner, parameters, arguments) \
  void run_##name(State& state VOLT_DETAIL_UNPAREN parameters) const;
  VOLT_DETAIL_HOOKS(VOLT_DETAIL_HOOK_RUN_DECLARATION)
#undef VOLT_DETAIL_HOOK_RUN_DECLARATION

  /// Every callback, in order.
  const std::vector<std::unique_ptr<AnyCallback<State>>>& all() const { return all_; }

 private:
  std::vector<std::unique_ptr<AnyCallback<State>>> all_;
  std::array<std::vector<AnyCallback<State>*>, hook_count> by_hook_{};
};

template <class State>
void CallbackList<State>::add_erased(std::unique_ptr<AnyCallback<State>> callback) {
  for (std::size_t hook = 0; hook < hook_count; ++hook) {
    if (callback->has(static_cast<Hook>(hook))) by_hook_[hook].push_back(callback.get());
  }
  all_.push_back(std::move(callback));
}

// run_<hook>: with a profiler in the state, each callback's hook is the action "[Callback]<type>.<hook>".
#define VOLT_DETAIL_HOOK_RUN_DEFINITION(name, owner, parameters, arguments)                                  \
  template <class State>                                                                                     \
  void CallbackList<State>::run_##name(State& state VOLT_DETAIL_UNPAREN parameters) const {                  \
    if constexpr (requires { state.profiler_; }) {                                                           \
      if (state.profiler_) [[unlikely]] {                                                                    \
        for (AnyCallback<State>* callback : with(Hook::name)) {                                              \
          ProfileScope scope(state.profiler_, "[Callback]" + profiled_type_name(callback->type_name().data()) + \
                                                  "." #name);                                                \
          callback->name(state VOLT_DETAIL_UNPAREN arguments);                                               \
        }                                                                                                    \
        return;                                                                                              \
      }                                                                                                      \
    }                                                                                                        \
    for (AnyCallback<State>* callback : with(Hook::name)) callback->name(state VOLT_DETAIL_UNPAREN arguments); \
  }
VOLT_DETAIL_HOOKS(VOLT_DETAIL_HOOK_RUN_DEFINITION)
#undef VOLT_DETAIL_HOOK_RUN_DEFINITION

}  // namespace volt::detail

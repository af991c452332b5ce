/// \file
/// The hook table: every hook the Trainer calls on callbacks and models, written once.
///
/// Everything else about hooks is derived from VOLT_DETAIL_HOOKS below: the volt::detail::Hook enumeration,
/// the hook names in messages, the type-erased callback interface with one virtual function per hook
/// (volt/callbacks/callback.hpp), the compile-time detection of which hooks a callback type defines, and the
/// model hooks the Trainer calls (volt/trainer/call.hpp). Adding a hook is one row here plus the call at the
/// place in a loop where Lightning calls it.
///
/// Each row is `X(name, owner, parameters, arguments)`:
/// * `owner`: `callback` (callbacks may define it), `model` (only a model may), or `both` (callbacks and
///   models). A model's hook takes the hook's arguments for models, optionally followed by
///   `volt::StepContext&`, or only the context, or nothing (see detail::ModelHook); Lightning calls the
///   callbacks' hook first, then the model's, and so does volt (volt/trainer/call.hpp).
/// * `parameters`: what a callback's hook takes after the state (`S` below), written with a leading comma
///   (empty for none); `arguments`: the names passed, likewise.
///
/// A callback's hook takes the Trainer's state first (`volt::TrainerState&` for the Trainer, or a template
/// parameter: `template <class State> void on_fit_start(State& state)`). A hook returning bool asks the Trainer
/// to stop when it returns true; a void hook cannot; a hook a type does not define costs nothing at run time.
#pragma once

#include <volt/profilers/profiler.hpp>

#include <torch/torch.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string_view>
#include <type_traits>

// clang-format off
/// The hook table (see the file comment). `State` names the Trainer's state type where the table is expanded.
#define VOLT_DETAIL_HOOKS(X)                                                                                    \
  X(setup,                     callback, (), ())                                                                \
  X(teardown,                  callback, (), ())                                                                \
  X(on_fit_start,              both,     (), ())                                                                \
  X(on_fit_end,                both,     (), ())                                                                \
  X(on_sanity_check_start,     callback, (), ())                                                                \
  X(on_sanity_check_end,       callback, (), ())                                                                \
  X(on_train_start,            both,     (), ())                                                                \
  X(on_train_end,              both,     (), ())                                                                \
  X(on_train_epoch_start,      both,     (), ())                                                                \
  X(on_train_epoch_end,        both,     (), ())                                                                \
  X(on_train_batch_start,      both,     (, std::int64_t batch_idx), (, batch_idx))                             \
  X(on_train_batch_end,        both,     (, const torch::Tensor& loss, std::int64_t batch_idx),                 \
                                         (, loss, batch_idx))                                                   \
  X(on_validation_start,       both,     (), ())                                                                \
  X(on_validation_end,         both,     (), ())                                                                \
  X(on_validation_epoch_start, both,     (), ())                                                                \
  X(on_validation_epoch_end,   both,     (), ())                                                                \
  X(on_validation_batch_start, both,     (, std::int64_t batch_idx), (, batch_idx))                             \
  X(on_validation_batch_end,   both,     (, std::int64_t batch_idx), (, batch_idx))                             \
  X(on_test_start,             both,     (), ())                                                                \
  X(on_test_end,               both,     (), ())                                                                \
  X(on_test_epoch_start,       both,     (), ())                                                                \
  X(on_test_epoch_end,         both,     (), ())                                                                \
  X(on_test_batch_start,       both,     (, std::int64_t batch_idx), (, batch_idx))                             \
  X(on_test_batch_end,         both,     (, std::int64_t batch_idx), (, batch_idx))                             \
  X(on_predict_start,          both,     (), ())                                                                \
  X(on_predict_end,            both,     (), ())                                                                \
  X(on_predict_epoch_start,    both,     (), ())                                                                \
  X(on_predict_epoch_end,      both,     (), ())                                                                \
  X(on_predict_batch_start,    both,     (, std::int64_t batch_idx), (, batch_idx))                             \
  X(on_predict_batch_end,      both,     (, std::int64_t batch_idx), (, batch_idx))                             \
  X(on_before_backward,        both,     (, const torch::Tensor& loss), (, loss))                               \
  X(on_after_backward,         both,     (), ())                                                                \
  X(on_before_optimizer_step,  both,     (, torch::optim::Optimizer& optimizer), (, optimizer))                 \
  X(on_before_zero_grad,       both,     (), ())                                                                \
  X(on_exception,              callback, (, const std::exception_ptr& error), (, error))
// clang-format on

/// The contents of a parenthesised list: `VOLT_DETAIL_UNPAREN (a, b)` is `a, b`.
#define VOLT_DETAIL_UNPAREN(...) __VA_ARGS__

namespace volt::detail {

/// Every hook of the table, in its order.
enum class Hook : std::size_t {
#define VOLT_DETAIL_HOOK_ENUMERATOR(name, owner, parameters, arguments) name,
  VOLT_DETAIL_HOOKS(VOLT_DETAIL_HOOK_ENUMERATOR)
#undef VOLT_DETAIL_HOOK_ENUMERATOR
  count_
};

/// The number of hooks in the table.
inline constexpr std::size_t hook_count = static_cast<std::size_t>(Hook::count_);

/// Each hook's name, for messages.
inline constexpr std::array<std::string_view, hook_count> hook_names{
#define VOLT_DETAIL_HOOK_NAME(name, owner, parameters, arguments) #name,
    VOLT_DETAIL_HOOKS(VOLT_DETAIL_HOOK_NAME)
#undef VOLT_DETAIL_HOOK_NAME
};

/// The name of `hook`.
constexpr std::string_view hook_name(Hook hook) { return hook_names[static_cast<std::size_t>(hook)]; }

/// Who may define a hook (the table's owner column).
struct HookOwner {
  bool callback;  ///< Callbacks may define it.
  bool model;     ///< Models may define it (with a StepContext& or no parameter).
};

/// The owner column of the table, per hook.
inline constexpr std::array<HookOwner, hook_count> hook_owners{
#define VOLT_DETAIL_HOOK_OWNER_callback HookOwner{true, false}
#define VOLT_DETAIL_HOOK_OWNER_model HookOwner{false, true}
#define VOLT_DETAIL_HOOK_OWNER_both HookOwner{true, true}
#define VOLT_DETAIL_HOOK_OWNER(name, owner, parameters, arguments) VOLT_DETAIL_HOOK_OWNER_##owner,
    VOLT_DETAIL_HOOKS(VOLT_DETAIL_HOOK_OWNER)
#undef VOLT_DETAIL_HOOK_OWNER
#undef VOLT_DETAIL_HOOK_OWNER_both
#undef VOLT_DETAIL_HOOK_OWNER_model
#undef VOLT_DETAIL_HOOK_OWNER_callback
};

/// Whether callbacks may define `hook`.
constexpr bool callback_hook(Hook hook) { return hook_owners[static_cast<std::size_t>(hook)].callback; }
/// Whether models may define `hook`.
constexpr bool model_hook(Hook hook) { return hook_owners[static_cast<std::size_t>(hook)].model; }

/// Calls model hook `H` on `module` when the module defines it. The model's hook takes the hook's arguments
/// for models (those of the callback's hook, except where a loop passes the model Lightning's own arguments:
/// the batch in the batch hooks, the optimizer in on_before_zero_grad), optionally followed by the step
/// context; a hook that takes arguments may also be defined with only the context or with nothing. The first
/// of these forms the module defines is called: `name(args..., ctx)`, `name(args...)`, `name(ctx)`, `name()`;
/// call() returns what the hook returns (void when the module does not define it).
template <Hook H>
struct ModelHook {
  static_assert(model_hook(H), "volt: this hook is not a model hook (see the owner column of VOLT_DETAIL_HOOKS)");
};

#define VOLT_DETAIL_MODEL_HOOK(name, owner, parameters, arguments)                                        \
  template <>                                                                                              \
  struct ModelHook<Hook::name> {                                                                           \
    template <class M, class Context, class... Arguments>                                                  \
    static constexpr bool defined =                                                                        \
        requires(M& module, Context& context, Arguments&... args) { module.name(args..., context); } ||     \
        requires(M& module, Arguments&... args) { module.name(args...); } ||                               \
        requires(M& module, Context& context) { module.name(context); } ||                                 \
        requires(M& module) { module.name(); };                                                            \
    template <class M, class Context, class... Arguments>                                                  \
    static decltype(auto) call(M& module, Context& context, Arguments&&... args) {                         \
      if constexpr (requires { context.trainer().profiler_; } &&                                           \
                    defined<M, Context, std::remove_reference_t<Arguments>...>) {                          \
        if (auto* profiler = context.trainer().profiler_) [[unlikely]] {                                   \
          ProfileScope scope(profiler, model_action<M>(#name));                                            \
          return invoke(module, context, args...);                                                         \
        }                                                                                                  \
      }                                                                                                    \
      return invoke(module, context, args...);                                                             \
    }                                                                                                      \
    template <class M, class Context, class... Arguments>                                                  \
    static decltype(auto) invoke(M& module, Context& context, Arguments&... args) {                        \
      if constexpr (requires { module.name(args..., context); }) {                                         \
        return module.name(args..., context);                                                              \
      } else if constexpr (requires { module.name(args...); }) {                                           \
        return module.name(args...);                                                                       \
      } else if constexpr (requires { module.name(context); }) {                                           \
        return module.name(context);                                                                       \
      } else if constexpr (requires { module.name(); }) {                                                  \
        return module.name();                                                                              \
      }                                                                                                    \
    }                                                                                                      \
  };
#define VOLT_DETAIL_MODEL_HOOK_IF_callback(name)
#define VOLT_DETAIL_MODEL_HOOK_IF_model(name) VOLT_DETAIL_MODEL_HOOK(name, , , )
#define VOLT_DETAIL_MODEL_HOOK_IF_both(name) VOLT_DETAIL_MODEL_HOOK(name, , , )
#define VOLT_DETAIL_MODEL_HOOK_ROW(name, owner, parameters, arguments) VOLT_DETAIL_MODEL_HOOK_IF_##owner(name)
VOLT_DETAIL_HOOKS(VOLT_DETAIL_MODEL_HOOK_ROW)
#undef VOLT_DETAIL_MODEL_HOOK_ROW
#undef VOLT_DETAIL_MODEL_HOOK_IF_both
#undef VOLT_DETAIL_MODEL_HOOK_IF_model
#undef VOLT_DETAIL_MODEL_HOOK_IF_callback
#undef VOLT_DETAIL_MODEL_HOOK

}  // namespace volt::detail

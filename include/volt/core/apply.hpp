/// \file
/// volt::apply_to_collection: Lightning's apply_to_collection for C++ values.
///
/// Rebuilds a nested value (containers, tuples, optionals, variants, aggregates, torch::data::Example, c10
/// containers) with the same type, replacing the leaves a function selects. The recursion is resolved at
/// compile time: a branch whose types cannot hold a leaf is returned as is without being walked, and nothing
/// is type-erased. batch_to_device (volt/transfer) is built on the same recursion (detail::rebuild_collection)
/// with its own choice of leaves.
#pragma once

#include <volt/core/range.hpp>
#include <volt/core/reflect.hpp>

#include <torch/torch.h>

#include <array>
#include <cstddef>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>

namespace volt::detail {

// ---------------------------------------------------------------------------------------------------
// What the recursion recognises. Order of precedence is in rebuild_collection.

template <class Type, template <class...> class Template>
inline constexpr bool is_specialization_of = false;
template <template <class...> class Template, class... Arguments>
inline constexpr bool is_specialization_of<Template<Arguments...>, Template> = true;

template <class Type>
inline constexpr bool is_std_array = false;
template <class Element, std::size_t Size>
inline constexpr bool is_std_array<std::array<Element, Size>> = true;

template <class Type>
concept std_tuple_or_pair = is_specialization_of<Type, std::tuple> || is_specialization_of<Type, std::pair>;

template <class Type>
concept std_variant = is_specialization_of<Type, std::variant>;

template <class Type>
concept torch_example = is_specialization_of<Type, torch::data::Example>;

template <class Type>
concept c10_list = is_specialization_of<Type, c10::List>;

template <class Type>
concept c10_dict = is_specialization_of<Type, c10::Dict>;

// Strings are sequences of characters, but a batch treats them as single values (as Lightning does).
template <class Type>
concept string_like =
    is_specialization_of<Type, std::basic_string> || is_specialization_of<Type, std::basic_string_view>;

// std::optional, and c10::optional where it is a distinct template (LibTorch 1.13).
template <class Type>
concept optional_like = !range_lookup::range<Type> && std::is_default_constructible_v<Type> &&
                        requires(Type& value) {
                          typename Type::value_type;
                          { value.has_value() } -> std::convertible_to<bool>;
                          *value;
                          value.reset();
                        };

// Owning containers only (they have an allocator): rebuilding a view (std::span) in place would write
// through to the caller's elements.
template <class Type>
concept map_like = range_lookup::range<Type> && requires {
  typename Type::key_type;
  typename Type::mapped_type;
  typename Type::allocator_type;
};

template <class Type>
concept owning_sequence = range_lookup::range<Type> && !string_like<Type> && !map_like<Type> &&
                          !requires { typename Type::key_type; } &&  // sets are not recursed into
                          requires {
                            typename Type::value_type;
                            typename Type::allocator_type;
                          } &&
                          // excludes std::vector<bool>, whose elements are proxies
                          std::is_same_v<range_lookup::reference_t<Type>, typename Type::value_type&>;

template <class Type>
concept reflected_aggregate = reflect::reflectable<Type> && !is_std_array<Type>;

// ---------------------------------------------------------------------------------------------------
// A visitor decides which values are leaves and what replaces them:
//   template <class Value> static constexpr bool is_leaf;        // Value has no cv or reference
//   template <class Leaf> std::remove_cvref_t<Leaf> visit(Leaf&&) const;

template <class Visitor, class Value>
consteval bool may_hold_leaf();

template <class Visitor, class... Types>
consteval bool any_may_hold_leaf(std::type_identity<std::tuple<Types...>>) {
  // Reference elements and members are not rebuilt (they do not own what they refer to).
  return ((!std::is_reference_v<Types> && may_hold_leaf<Visitor, std::remove_cv_t<Types>>()) || ...);
}

template <class Visitor, class Value>
consteval bool may_hold_leaf() {
  if constexpr (Visitor::template is_leaf<Value>) {
    return true;
  } else if constexpr (optional_like<Value>) {
    return may_hold_leaf<Visitor, std::remove_cv_t<typename Value::value_type>>();
  } else if constexpr (std_variant<Value>) {
    return []<class... Alternatives>(std::type_identity<std::variant<Alternatives...>>) {
      return any_may_hold_leaf<Visitor>(std::type_identity<std::tuple<Alternatives...>>{});
    }(std::type_identity<Value>{});
  } else if constexpr (std_tuple_or_pair<Value>) {
    return []<std::size_t... Index>(std::index_sequence<Index...>) {
      return any_may_hold_leaf<Visitor>(
          std::type_identity<std::tuple<std::tuple_element_t<Index, Value>...>>{});
    }(std::make_index_sequence<std::tuple_size_v<Value>>{});
  } else if constexpr (is_std_array<Value>) {
    return std::tuple_size_v<Value> > 0 && may_hold_leaf<Visitor, std::remove_cv_t<typename Value::value_type>>();
  } else if constexpr (torch_example<Value>) {
    if constexpr (std::is_void_v<typename Value::TargetType>) {
      return may_hold_leaf<Visitor, typename Value::DataType>();
    } else {
      return may_hold_leaf<Visitor, typename Value::DataType>() ||
             may_hold_leaf<Visitor, typename Value::TargetType>();
    }
  } else if constexpr (c10_list<Value>) {
    return may_hold_leaf<Visitor, typename Value::value_type>();
  } else if constexpr (c10_dict<Value>) {
    return may_hold_leaf<Visitor, typename Value::mapped_type>();
  } else if constexpr (map_like<Value>) {
    return may_hold_leaf<Visitor, std::remove_cv_t<typename Value::mapped_type>>();
  } else if constexpr (owning_sequence<Value>) {
    return may_hold_leaf<Visitor, std::remove_cv_t<typename Value::value_type>>();
  } else if constexpr (reflected_aggregate<Value>) {
    return []<class... Fields>(reflect::type_list<Fields...>) {
      return any_may_hold_leaf<Visitor>(std::type_identity<std::tuple<Fields...>>{});
    }(reflect::field_types<Value>{});
  } else {
    return false;
  }
}

template <class Visitor, class Data>
std::remove_cvref_t<Data> rebuild_collection(Data&& data, const Visitor& visitor);

// A reference element of a tuple or member of an aggregate is passed through: it is not the batch's to move.
template <class Declared, class Visitor, class Element>
decltype(auto) rebuild_element(Element&& element, const Visitor& visitor) {
  if constexpr (std::is_reference_v<Declared>) {
    return std::forward<Element>(element);
  } else {
    return rebuild_collection(std::forward<Element>(element), visitor);
  }
}

template <std::size_t Index, class Visitor, class Data>
std::remove_cvref_t<Data> rebuild_variant(Data&& data, const Visitor& visitor) {
  using Value = std::remove_cvref_t<Data>;
  if constexpr (Index + 1 < std::variant_size_v<Value>) {
    if (data.index() != Index) return rebuild_variant<Index + 1>(std::forward<Data>(data), visitor);
  }
  return Value(std::in_place_index<Index>, rebuild_collection(std::get<Index>(std::forward<Data>(data)), visitor));
}

// Rebuilds the elements of a container the caller gave up (or of our own copy) in place: no allocation.
template <class Container, class Visitor>
void rebuild_elements_in_place(Container& container, const Visitor& visitor) {
  for (auto& element : container) element = rebuild_collection(std::move(element), visitor);
}

template <class Container, class Element>
void append(Container& container, Element&& element) {
  if constexpr (requires { container.emplace_back(std::forward<Element>(element)); }) {
    container.emplace_back(std::forward<Element>(element));  // vector's insert would need assignable elements
  } else {
    container.insert(container.end(), std::forward<Element>(element));
  }
}

/// Core of apply_to_collection and batch_to_device: returns `data` rebuilt with the same type, every leaf
/// (as the visitor defines it) replaced by `visitor.visit(leaf)`. Precedence, first match wins:
/// leaf; nothing inside can be a leaf (returned as is, not walked); optional; variant; tuple/pair;
/// std::array; torch::data::Example; c10::List; c10::Dict; map-like containers (values only); owning
/// sequence containers; reflectable aggregates; anything else returned as is.
/// Rvalues are moved from, and their containers reused; lvalues are copied once, then rebuilt in place.
template <class Visitor, class Data>
std::remove_cvref_t<Data> rebuild_collection(Data&& data, const Visitor& visitor) {
  using Value = std::remove_cvref_t<Data>;
  if constexpr (Visitor::template is_leaf<Value>) {
    return visitor.visit(std::forward<Data>(data));
  } else if constexpr (!may_hold_leaf<Visitor, Value>()) {
    return std::forward<Data>(data);
  } else if constexpr (optional_like<Value>) {
    if (!data.has_value()) return Value{};
    return Value(rebuild_collection(*std::forward<Data>(data), visitor));
  } else if constexpr (std_variant<Value>) {
    if (data.valueless_by_exception()) return std::forward<Data>(data);
    return rebuild_variant<0>(std::forward<Data>(data), visitor);
  } else if constexpr (std_tuple_or_pair<Value>) {
    return [&]<std::size_t... Index>(std::index_sequence<Index...>) {
      return Value(rebuild_element<std::tuple_element_t<Index, Value>>(std::get<Index>(std::forward<Data>(data)),
                                                                        visitor)...);
    }(std::make_index_sequence<std::tuple_size_v<Value>>{});
  } else if constexpr (is_std_array<Value>) {
    Value result = std::forward<Data>(data);
    rebuild_elements_in_place(result, visitor);
    return result;
  } else if constexpr (torch_example<Value>) {
    if constexpr (std::is_void_v<typename Value::TargetType>) {
      return Value(rebuild_collection(std::forward<Data>(data).data, visitor));
    } else {
      return Value(rebuild_collection(std::forward<Data>(data).data, visitor),
                   rebuild_collection(std::forward<Data>(data).target, visitor));
    }
  } else if constexpr (c10_list<Value>) {
    // Copies of a c10::List share one storage, so only a list nobody else sees may be rebuilt in place.
    Value result = [&] {
      if constexpr (!std::is_lvalue_reference_v<Data>) {
        if (data.use_count() == 1) return std::move(data);
      }
      return data.copy();
    }();
    for (std::size_t index = 0; index < result.size(); ++index) {
      result.set(index, rebuild_collection(result.extract(index), visitor));
    }
    return result;
  } else if constexpr (c10_dict<Value>) {
    Value result = data.copy();  // shared storage, as for c10::List
    for (const auto& entry : result) entry.setValue(rebuild_collection(entry.value(), visitor));
    return result;
  } else if constexpr (map_like<Value>) {
    static_assert(std::is_move_assignable_v<typename Value::mapped_type>,
                  "volt: a map whose values hold tensors must have assignable values to be rebuilt");
    Value result = std::forward<Data>(data);
    for (auto& entry : result) entry.second = rebuild_collection(std::move(entry.second), visitor);
    return result;
  } else if constexpr (owning_sequence<Value>) {
    if constexpr (std::is_move_assignable_v<typename Value::value_type>) {
      Value result = std::forward<Data>(data);
      rebuild_elements_in_place(result, visitor);
      return result;
    } else {
      // Elements that cannot be assigned (const members) are rebuilt into a new container.
      Value result;
      for (auto& element : data) {
        if constexpr (std::is_lvalue_reference_v<Data>) {
          append(result, rebuild_collection(element, visitor));
        } else {
          append(result, rebuild_collection(std::move(element), visitor));
        }
      }
      return result;
    }
  } else if constexpr (reflected_aggregate<Value>) {
    return [&]<class... Declared>(reflect::type_list<Declared...>) {
      return reflect::with_fields(std::forward<Data>(data), [&](auto&&... fields) {
        return Value{rebuild_element<Declared>(std::forward<decltype(fields)>(fields), visitor)...};
      });
    }(reflect::field_types<Value>{});
  } else {
    return std::forward<Data>(data);
  }
}

// ---------------------------------------------------------------------------------------------------
// apply_to_collection's leaf rule.

// The parameter of a callable with exactly one non-template call signature.
template <class Result, class Class, class Parameter, bool Noexcept>
Parameter sole_parameter_of(Result (Class::*)(Parameter) noexcept(Noexcept));
template <class Result, class Class, class Parameter, bool Noexcept>
Parameter sole_parameter_of(Result (Class::*)(Parameter) const noexcept(Noexcept));
template <class Result, class Class, class Parameter, bool Noexcept>
Parameter sole_parameter_of(Result (Class::*)(Parameter) & noexcept(Noexcept));
template <class Result, class Class, class Parameter, bool Noexcept>
Parameter sole_parameter_of(Result (Class::*)(Parameter) const & noexcept(Noexcept));
template <class Result, class Class, class Parameter, bool Noexcept>
Parameter sole_parameter_of(Result (Class::*)(Parameter) && noexcept(Noexcept));
template <class Result, class Class, class Parameter, bool Noexcept>
Parameter sole_parameter_of(Result (Class::*)(Parameter) const && noexcept(Noexcept));
template <class Result, class Parameter, bool Noexcept>
Parameter sole_parameter_of(Result (*)(Parameter) noexcept(Noexcept));

template <class Callable>
struct sole_parameter {};
template <class Callable>
  requires requires { sole_parameter_of(&Callable::operator()); }
struct sole_parameter<Callable> {
  using type = decltype(sole_parameter_of(&Callable::operator()));
};
template <class Callable>
  requires std::is_pointer_v<Callable> && requires { sole_parameter_of(std::declval<Callable>()); }
struct sole_parameter<Callable> {
  using type = decltype(sole_parameter_of(std::declval<Callable>()));
};

template <class Callable>
concept has_sole_parameter = requires { typename sole_parameter<std::decay_t<Callable>>::type; };

// See apply_to_collection's contract for the rule and why.
template <class Function, class Value>
consteval bool function_takes_leaf() {
  if constexpr (has_sole_parameter<Function>) {
    return std::is_same_v<std::remove_cvref_t<typename sole_parameter<std::decay_t<Function>>::type>, Value>;
  } else {
    return std::is_invocable_v<Function&, const Value&> || std::is_invocable_v<Function&, Value&> ||
           std::is_invocable_v<Function&, Value&&>;
  }
}

template <class>
inline constexpr bool dependent_false = false;

template <class Function, class Argument>
concept invocable_with_result =
    std::is_invocable_v<Function, Argument> && !std::is_void_v<std::invoke_result_t<Function, Argument>>;

template <class Function>
struct function_leaf_visitor {
  Function& function;

  template <class Value>
  static constexpr bool is_leaf = function_takes_leaf<Function, Value>();

  template <class Leaf>
  std::remove_cvref_t<Leaf> visit(Leaf&& leaf) const {
    using Value = std::remove_cvref_t<Leaf>;
    if constexpr (invocable_with_result<Function&, Leaf&&>) {
      static_assert(std::is_convertible_v<std::invoke_result_t<Function&, Leaf&&>, Value>,
                    "volt::apply_to_collection: the function's result must convert to the type of the leaf it "
                    "was given (the collection keeps its type)");
      return std::invoke(function, std::forward<Leaf>(leaf));
    } else if constexpr (std::is_invocable_v<Function&, Value&>) {
      // A function that takes a non-const reference, or returns nothing, works on our own copy of the leaf,
      // which is what the collection keeps.
      Value own = std::forward<Leaf>(leaf);
      if constexpr (std::is_void_v<std::invoke_result_t<Function&, Value&>>) {
        std::invoke(function, own);
        return own;
      } else {
        static_assert(std::is_convertible_v<std::invoke_result_t<Function&, Value&>, Value>,
                      "volt::apply_to_collection: the function's result must convert to the type of the leaf it "
                      "was given (the collection keeps its type)");
        return std::invoke(function, own);
      }
    } else {
      static_assert(dependent_false<Leaf>,
                    "volt::apply_to_collection: the function matches this leaf type but cannot be called with "
                    "it (it takes an rvalue reference and returns nothing)");
    }
  }
};

}  // namespace volt::detail

namespace volt {

/// Lightning's apply_to_collection: returns `data` rebuilt with the same type, every leaf value `x` replaced
/// by `function(x)` (converted to the leaf's type), everything else kept.
///
/// Which values are leaves (checked at every level, before recursing, so a matching container is itself a
/// leaf and is not walked):
/// * `function` with one non-template call signature (a lambda with a concrete parameter type, a function
///   pointer, std::function): exactly the values whose type, without const and reference, is the parameter's
///   type, again without const and reference. No conversion is ever applied, so a function taking
///   `const torch::Tensor&` sees tensors only, never a double, a c10::Scalar or an int that could be
///   converted; derived classes do not match their base either.
/// * a generic lambda or an overload set: the values `function` is invocable with. Constrain it
///   (`[](const auto& x) requires std::floating_point<std::decay_t<decltype(x)>> { ... }`): it is also
///   tested against every container on the way down, so an unconstrained `auto` parameter matches the whole
///   `data`, and a body that does not compile for a container is a hard error.
/// A function that returns void, or that takes a non-const lvalue reference, is called with a copy of the
/// leaf that the result then holds (so in-place tensor functions work and the input is left alone).
///
/// Recursed into, rebuilt with the same type: std::optional (and c10::optional), std::variant, std::tuple,
/// std::pair, std::array, torch::data::Example, c10::List, c10::Dict (values), map-like containers (values;
/// keys untouched), owning sequence containers (vector, deque, list, forward_list, ...), and aggregate structs
/// of up to volt::reflect::max_fields fields (reference members are kept, not recursed). Not recursed
/// into: sets, strings, std::vector<bool>, views such as std::span, pointers, and every other type, which are
/// returned as is. A branch whose type cannot contain a leaf is returned without being walked.
///
/// An rvalue `data` is moved from: its containers are reused, so no container is copied; an lvalue is copied
/// once. No allocation happens beyond that copy (and the new storage of c10 containers, whose copies alias).
template <class Data, class Function>
std::remove_cvref_t<Data> apply_to_collection(Data&& data, Function&& function) {
  const detail::function_leaf_visitor<std::remove_reference_t<Function>> visitor{function};
  return detail::rebuild_collection(std::forward<Data>(data), visitor);
}

}  // namespace volt

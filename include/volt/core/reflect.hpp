/// \file
/// Field reflection for plain aggregate structs (the C++ counterpart of a namedtuple or dataclass).
///
/// Written with structured bindings, because C++20 has no reflection and Boost.PFR is not available on the
/// project's platforms. Supports aggregates of up to volt::reflect::max_fields (32) fields.
///
/// What cannot be reflected, and why:
/// * non-const lvalue reference members: the field count is found by brace-initializing the type with
///   placeholders that convert to any value type; such a placeholder cannot bind to `T&`, so these aggregates
///   report no fields (reflectable<T> is false) and callers leave them alone. `const T&` and `T&&` members bind
///   and are reflected (with_fields passes them as lvalues).
/// * C array members and base classes with members: brace elision (arrays) and base-class initializers make the
///   brace count differ from the number of structured bindings, and the binding in with_fields fails to compile
///   ("only N names provided for structured binding").
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

/// Field reflection for plain aggregate structs (up to reflect::max_fields fields).
namespace volt::reflect {

/// The most fields an aggregate may have for volt to see them. Raising it means extending with_fields below.
inline constexpr std::size_t max_fields = 32;

/// A list of types (the result of field_types).
template <class... Types>
struct type_list {};

namespace detail {

// Stands in for one initializer when counting fields. Never called: only used in unevaluated requires
// expressions, so it is declared and not defined (a definition would have to produce a value of any type).
struct any_field_value {
  template <class Value>
  operator Value() const noexcept;
};

template <class Aggregate, std::size_t... Index>
consteval bool brace_initializable_with(std::index_sequence<Index...>) {
  return requires { Aggregate{((void)Index, any_field_value{})...}; };
}

template <class Aggregate, std::size_t Count>
consteval std::size_t largest_brace_count() {
  // Counts down because an aggregate whose member has no default initializer accepts only the full count.
  if constexpr (Count == 0) {
    return 0;
  } else if constexpr (brace_initializable_with<Aggregate>(std::make_index_sequence<Count>{})) {
    return Count;
  } else {
    return largest_brace_count<Aggregate, Count - 1>();
  }
}

// A reference member stays an lvalue even when the aggregate is an rvalue: moving from it would steal from
// an object the aggregate does not own.
template <class Aggregate, class DeclaredField, class Field>
constexpr decltype(auto) forward_field(Field& field) noexcept {
  if constexpr (std::is_reference_v<DeclaredField> || std::is_lvalue_reference_v<Aggregate>) {
    return (field);
  } else {
    return std::move(field);
  }
}

struct collect_field_types {
  template <class... Fields>
  type_list<Fields...> operator()(Fields&&...) const;  // unevaluated only
};

}  // namespace detail

/// True for class aggregates (not unions) whose fields volt can reflect: the structs a user writes as a
/// batch or options type. Aggregates with non-const lvalue reference members are not reflectable.
template <class Type>
concept reflectable = std::is_class_v<Type> && std::is_aggregate_v<Type> && !std::is_union_v<Type> &&
                      (std::is_empty_v<Type> || detail::largest_brace_count<Type, max_fields + 1>() > 0);

/// Number of fields of a reflectable aggregate. Fails to compile (static_assert) above max_fields.
template <reflectable Type>
inline constexpr std::size_t field_count = [] {
  constexpr std::size_t count = detail::largest_brace_count<Type, max_fields + 1>();
  static_assert(count <= max_fields,
                "volt: this aggregate has more fields than volt::reflect::max_fields (32); group some of them in "
                "a nested struct");
  return count;
}();

// VOLT_DETAIL_FIELD(fN): the structured binding fN of with_fields, forwarded by detail::forward_field. A macro
// because forward_field needs `decltype(fN)`, which for a structured binding is the member's declared type
// (how a reference member is told from a value member) and which only the binding's own name gives: a
// function taking the binding would see an lvalue of the member's type. The only macro of this header;
// defined here, at namespace scope, and undefined right after with_fields.
#define VOLT_DETAIL_FIELD(field) ::volt::reflect::detail::forward_field<Aggregate, decltype(field)>(field)

/// Calls `visitor(fields...)` with every field of `aggregate` in declaration order and returns its result.
/// Fields are forwarded with the aggregate's value category (moved from an rvalue aggregate), except
/// reference members, which are always passed as lvalues. An empty aggregate gives `visitor()`.
template <class Aggregate, class Visitor>
  requires reflectable<std::remove_cvref_t<Aggregate>>
constexpr decltype(auto) with_fields(Aggregate&& aggregate, Visitor&& visitor) {
  constexpr std::size_t count = field_count<std::remove_cvref_t<Aggregate>>;
  // If a structured binding below fails to compile, the aggregate has a C array member or a base class with
  // members (see the top of this file).
  if constexpr (count == 0) {
    return std::forward<Visitor>(visitor)();
  } else if constexpr (count == 1) {
    auto&& [f0] = std::forward<Aggregate>(aggregate);
    return std::forward<Visitor>(visitor)(
        VOLT_DETAIL_FIELD(f0));
  } else if constexpr (count == 2) {
    auto&& [f0, f1] = std::forward<Aggregate>(aggregate);
    return std::forward<Visitor>(visitor)(
        VOLT_DETAIL_FIELD(f0), VOLT_DETAIL_FIELD(f1));
  } else if constexpr (count == 3) {
    auto&& [f0, f1, f2] = std::forward<Aggregate>(aggregate);
    return std::forward<Visitor>(visitor)(
        VOLT_DETAIL_FIELD(f0), VOLT_DETAIL_FIELD(f1), VOLT_DETAIL_FIELD(f2));
  } else if constexpr (count == 4) {
    auto&& [f0, f1, f2, f3] = std::forward<Aggregate>(aggregate);
    return std::forward<Visitor>(visitor)(
        VOLT_DETAIL_FIELD(f0), VOLT_DETAIL_FIELD(f1), VOLT_DETAIL_FIELD(f2), VOLT_DETAIL_FIELD(f3));
  } else if constexpr (count == 5) {
    auto&& [f0, f1, f2, f3, f4] = std::forward<Aggregate>(aggregate);
    return std::forward<Visitor>(visitor)(
        VOLT_DETAIL_FIELD(f0), VOLT_DETAIL_FIELD(f1), VOLT_DETAIL_FIELD(f2), VOLT_DETAIL_FIELD(f3),
        VOLT_DETAIL_FIELD(f4));
  } else if constexpr (count == 6) {
    auto&& [f0, f1, f2, f3, f4, f5] = std::forward<Aggregate>(aggregate);
    return std::forward<Visitor>(visitor)(
        VOLT_DETAIL_FIELD(f0), VOLT_DETAIL_FIELD(f1), VOLT_DETAIL_FIELD(f2), VOLT_DETAIL_FIELD(f3),
        VOLT_DETAIL_FIELD(f4), VOLT_DETAIL_FIELD(f5));
  } else if constexpr (count == 7) {
    auto&& [f0, f1, f2, f3, f4, f5, f6] = std::forward<Aggregate>(aggregate);
    return std::forward<Visitor>(visitor)(
        VOLT_DETAIL_FIELD(f0), VOLT_DETAIL_FIELD(f1), VOLT_DETAIL_FIELD(f2), VOLT_DETAIL_FIELD(f3),
        VOLT_DETAIL_FIELD(f4), VOLT_DETAIL_FIELD(f5), VOLT_DETAIL_FIELD(f6));
  } else if constexpr (count == 8) {
    auto&& [f0, f1, f2, f3, f4, f5, f6, f7] = std::forward<Aggregate>(aggregate);
    return std::forward<Visitor>(visitor)(
        VOLT_DETAIL_FIELD(f0), VOLT_DETAIL_FIELD(f1), VOLT_DETAIL_FIELD(f2), VOLT_DETAIL_FIELD(f3),
        VOLT_DETAIL_FIELD(f4), VOLT_DETAIL_FIELD(f5), VOLT_DETAIL_FIELD(f6), VOLT_DETAIL_FIELD(f7));
  } else if constexpr (count == 9) {
    auto&& [f0, f1, f2, f3, f4, f5, f6, f7, f8] = std::forward<Aggregate>(aggregate);
    return std::forward<Visitor>(visitor)(
        VOLT_DETAIL_FIELD(f0), VOLT_DETAIL_FIELD(f1), VOLT_DETAIL_FIELD(f2), VOLT_DETAIL_FIELD(f3),
        VOLT_DETAIL_FIELD(f4), VOLT_DETAIL_FIELD(f5), VOLT_DETAIL_FIELD(f6), VOLT_DETAIL_FIELD(f7),
        VOLT_DETAIL_FIELD(f8));
  } else if constexpr (count == 10) {
    auto&& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9] = std::forward<Aggregate>(aggregate);
    return std::forward<Visitor>(visitor)(
        VOLT_DETAIL_FIELD(f0), VOLT_DETAIL_FIELD(f1), VOLT_DETAIL_FIELD(f2), VOLT_DETAIL_FIELD(f3),
        VOLT_DETAIL_FIELD(f4), VOLT_DETAIL_FIELD(f5), VOLT_DETAIL_FIELD(f6), VOLT_DETAIL_FIELD(f7),
        VOLT_DETAIL_FIELD(f8), VOLT_DETAIL_FIELD(f9));
  } else if constexpr (count == 11) {
    auto&& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10] = std::forward<Aggregate>(aggregate);
    return std::forward<Visitor>(visitor)(
        VOLT_DETAIL_FIELD(f0), VOLT_DETAIL_FIELD(f1), VOLT_DETAIL_FIELD(f2), VOLT_DETAIL_FIELD(f3),
        VOLT_DETAIL_FIELD(f4), VOLT_DETAIL_FIELD(f5), VOLT_DETAIL_FIELD(f6), VOLT_DETAIL_FIELD(f7),
        VOLT_DETAIL_FIELD(f8), VOLT_DETAIL_FIELD(f9), VOLT_DETAIL_FIELD(f10));
  } else if constexpr (count == 12) {
    auto&& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11] = std::forward<Aggregate>(aggregate);
    return std::forward<Visitor>(visitor)(
        VOLT_DETAIL_FIELD(f0), VOLT_DETAIL_FIELD(f1), VOLT_DETAIL_FIELD(f2), VOLT_DETAIL_FIELD(f3),
        VOLT_DETAIL_FIELD(f4), VOLT_DETAIL_FIELD(f5), VOLT_DETAIL_FIELD(f6), VOLT_DETAIL_FIELD(f7),
        VOLT_DETAIL_FIELD(f8), VOLT_DETAIL_FIELD(f9), VOLT_DETAIL_FIELD(f10), VOLT_DETAIL_FIELD(f11));
  } else if constexpr (count == 13) {
    auto&& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12] = std::forward<Aggregate>(aggregate);
    return std::forward<Visitor>(visitor)(
        VOLT_DETAIL_FIELD(f0), VOLT_DETAIL_FIELD(f1), VOLT_DETAIL_FIELD(f2), VOLT_DETAIL_FIELD(f3),
        VOLT_DETAIL_FIELD(f4), VOLT_DETAIL_FIELD(f5), VOLT_DETAIL_FIELD(f6), VOLT_DETAIL_FIELD(f7),
        VOLT_DETAIL_FIELD(f8), VOLT_DETAIL_FIELD(f9), VOLT_DETAIL_FIELD(f10), VOLT_DETAIL_FIELD(f11),
        VOLT_DETAIL_FIELD(f12));
  } else if constexpr (count == 14) {
    auto&& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13] = std::forward<Aggregate>(aggregate);
    return std::forward<Visitor>(visitor)(
        VOLT_DETAIL_FIELD(f0), VOLT_DETAIL_FIELD(f1), VOLT_DETAIL_FIELD(f2), VOLT_DETAIL_FIELD(f3),
        VOLT_DETAIL_FIELD(f4), VOLT_DETAIL_FIELD(f5), VOLT_DETAIL_FIELD(f6), VOLT_DETAIL_FIELD(f7),
        VOLT_DETAIL_FIELD(f8), VOLT_DETAIL_FIELD(f9), VOLT_DETAIL_FIELD(f10), VOLT_DETAIL_FIELD(f11),
        VOLT_DETAIL_FIELD(f12), VOLT_DETAIL_FIELD(f13));
  } else if constexpr (count == 15) {
    auto&& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14]
        = std::forward<Aggregate>(aggregate);
    return std::forward<Visitor>(visitor)(
        VOLT_DETAIL_FIELD(f0), VOLT_DETAIL_FIELD(f1), VOLT_DETAIL_FIELD(f2), VOLT_DETAIL_FIELD(f3),
        VOLT_DETAIL_FIELD(f4), VOLT_DETAIL_FIELD(f5), VOLT_DETAIL_FIELD(f6), VOLT_DETAIL_FIELD(f7),
        VOLT_DETAIL_FIELD(f8), VOLT_DETAIL_FIELD(f9), VOLT_DETAIL_FIELD(f10), VOLT_DETAIL_FIELD(f11),
        VOLT_DETAIL_FIELD(f12), VOLT_DETAIL_FIELD(f13), VOLT_DETAIL_FIELD(f14));
  } else if constexpr (count == 16) {
    auto&& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15]
        = std::forward<Aggregate>(aggregate);
    return std::forward<Visitor>(visitor)(
        VOLT_DETAIL_FIELD(f0), VOLT_DETAIL_FIELD(f1), VOLT_DETAIL_FIELD(f2), VOLT_DETAIL_FIELD(f3),
        VOLT_DETAIL_FIELD(f4), VOLT_DETAIL_FIELD(f5), VOLT_DETAIL_FIELD(f6), VOLT_DETAIL_FIELD(f7),
        VOLT_DETAIL_FIELD(f8), VOLT_DETAIL_FIELD(f9), VOLT_DETAIL_FIELD(f10), VOLT_DETAIL_FIELD(f11),
        VOLT_DETAIL_FIELD(f12), VOLT_DETAIL_FIELD(f13), VOLT_DETAIL_FIELD(f14), VOLT_DETAIL_FIELD(f15));
  } else if constexpr (count == 17) {
    auto&& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16]
        = std::forward<Aggregate>(aggregate);
    return std::forward<Visitor>(visitor)(
        VOLT_DETAIL_FIELD(f0), VOLT_DETAIL_FIELD(f1), VOLT_DETAIL_FIELD(f2), VOLT_DETAIL_FIELD(f3),
        VOLT_DETAIL_FIELD(f4), VOLT_DETAIL_FIELD(f5), VOLT_DETAIL_FIELD(f6), VOLT_DETAIL_FIELD(f7),
        VOLT_DETAIL_FIELD(f8), VOLT_DETAIL_FIELD(f9), VOLT_DETAIL_FIELD(f10), VOLT_DETAIL_FIELD(f11),
        VOLT_DETAIL_FIELD(f12), VOLT_DETAIL_FIELD(f13), VOLT_DETAIL_FIELD(f14), VOLT_DETAIL_FIELD(f15),
        VOLT_DETAIL_FIELD(f16));
  } else if constexpr (count == 18) {
    auto&& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17]
        = std::forward<Aggregate>(aggregate);
    return std::forward<Visitor>(visitor)(
        VOLT_DETAIL_FIELD(f0), VOLT_DETAIL_FIELD(f1), VOLT_DETAIL_FIELD(f2), VOLT_DETAIL_FIELD(f3),
        VOLT_DETAIL_FIELD(f4), VOLT_DETAIL_FIELD(f5), VOLT_DETAIL_FIELD(f6), VOLT_DETAIL_FIELD(f7),
        VOLT_DETAIL_FIELD(f8), VOLT_DETAIL_FIELD(f9), VOLT_DETAIL_FIELD(f10), VOLT_DETAIL_FIELD(f11),
        VOLT_DETAIL_FIELD(f12), VOLT_DETAIL_FIELD(f13), VOLT_DETAIL_FIELD(f14), VOLT_DETAIL_FIELD(f15),
        VOLT_DETAIL_FIELD(f16), VOLT_DETAIL_FIELD(f17));
  } else if constexpr (count == 19) {
    auto&& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18]
        = std::forward<Aggregate>(aggregate);
    return std::forward<Visitor>(visitor)(
        VOLT_DETAIL_FIELD(f0), VOLT_DETAIL_FIELD(f1), VOLT_DETAIL_FIELD(f2), VOLT_DETAIL_FIELD(f3),
        VOLT_DETAIL_FIELD(f4), VOLT_DETAIL_FIELD(f5), VOLT_DETAIL_FIELD(f6), VOLT_DETAIL_FIELD(f7),
        VOLT_DETAIL_FIELD(f8), VOLT_DETAIL_FIELD(f9), VOLT_DETAIL_FIELD(f10), VOLT_DETAIL_FIELD(f11),
        VOLT_DETAIL_FIELD(f12), VOLT_DETAIL_FIELD(f13), VOLT_DETAIL_FIELD(f14), VOLT_DETAIL_FIELD(f15),
        VOLT_DETAIL_FIELD(f16), VOLT_DETAIL_FIELD(f17), VOLT_DETAIL_FIELD(f18));
  } else if constexpr (count == 20) {
    auto&& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19]
        = std::forward<Aggregate>(aggregate);
    return std::forward<Visitor>(visitor)(
        VOLT_DETAIL_FIELD(f0), VOLT_DETAIL_FIELD(f1), VOLT_DETAIL_FIELD(f2), VOLT_DETAIL_FIELD(f3),
        VOLT_DETAIL_FIELD(f4), VOLT_DETAIL_FIELD(f5), VOLT_DETAIL_FIELD(f6), VOLT_DETAIL_FIELD(f7),
        VOLT_DETAIL_FIELD(f8), VOLT_DETAIL_FIELD(f9), VOLT_DETAIL_FIELD(f10), VOLT_DETAIL_FIELD(f11),
        VOLT_DETAIL_FIELD(f12), VOLT_DETAIL_FIELD(f13), VOLT_DETAIL_FIELD(f14), VOLT_DETAIL_FIELD(f15),
        VOLT_DETAIL_FIELD(f16), VOLT_DETAIL_FIELD(f17), VOLT_DETAIL_FIELD(f18), VOLT_DETAIL_FIELD(f19));
  } else if constexpr (count == 21) {
    auto&& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19,
            f20]
        = std::forward<Aggregate>(aggregate);
    return std::forward<Visitor>(visitor)(
        VOLT_DETAIL_FIELD(f0), VOLT_DETAIL_FIELD(f1), VOLT_DETAIL_FIELD(f2), VOLT_DETAIL_FIELD(f3),
        VOLT_DETAIL_FIELD(f4), VOLT_DETAIL_FIELD(f5), VOLT_DETAIL_FIELD(f6), VOLT_DETAIL_FIELD(f7),
        VOLT_DETAIL_FIELD(f8), VOLT_DETAIL_FIELD(f9), VOLT_DETAIL_FIELD(f10), VOLT_DETAIL_FIELD(f11),
        VOLT_DETAIL_FIELD(f12), VOLT_DETAIL_FIELD(f13), VOLT_DETAIL_FIELD(f14), VOLT_DETAIL_FIELD(f15),
        VOLT_DETAIL_FIELD(f16), VOLT_DETAIL_FIELD(f17), VOLT_DETAIL_FIELD(f18), VOLT_DETAIL_FIELD(f19),
        VOLT_DETAIL_FIELD(f20));
  } else if constexpr (count == 22) {
    auto&& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19,
            f20, f21]
        = std::forward<Aggregate>(aggregate);
    return std::forward<Visitor>(visitor)(
        VOLT_DETAIL_FIELD(f0), VOLT_DETAIL_FIELD(f1), VOLT_DETAIL_FIELD(f2), VOLT_DETAIL_FIELD(f3),
        VOLT_DETAIL_FIELD(f4), VOLT_DETAIL_FIELD(f5), VOLT_DETAIL_FIELD(f6), VOLT_DETAIL_FIELD(f7),
        VOLT_DETAIL_FIELD(f8), VOLT_DETAIL_FIELD(f9), VOLT_DETAIL_FIELD(f10), VOLT_DETAIL_FIELD(f11),
        VOLT_DETAIL_FIELD(f12), VOLT_DETAIL_FIELD(f13), VOLT_DETAIL_FIELD(f14), VOLT_DETAIL_FIELD(f15),
        VOLT_DETAIL_FIELD(f16), VOLT_DETAIL_FIELD(f17), VOLT_DETAIL_FIELD(f18), VOLT_DETAIL_FIELD(f19),
        VOLT_DETAIL_FIELD(f20), VOLT_DETAIL_FIELD(f21));
  } else if constexpr (count == 23) {
    auto&& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19,
            f20, f21, f22]
        = std::forward<Aggregate>(aggregate);
    return std::forward<Visitor>(visitor)(
        VOLT_DETAIL_FIELD(f0), VOLT_DETAIL_FIELD(f1), VOLT_DETAIL_FIELD(f2), VOLT_DETAIL_FIELD(f3),
        VOLT_DETAIL_FIELD(f4), VOLT_DETAIL_FIELD(f5), VOLT_DETAIL_FIELD(f6), VOLT_DETAIL_FIELD(f7),
        VOLT_DETAIL_FIELD(f8), VOLT_DETAIL_FIELD(f9), VOLT_DETAIL_FIELD(f10), VOLT_DETAIL_FIELD(f11),
        VOLT_DETAIL_FIELD(f12), VOLT_DETAIL_FIELD(f13), VOLT_DETAIL_FIELD(f14), VOLT_DETAIL_FIELD(f15),
        VOLT_DETAIL_FIELD(f16), VOLT_DETAIL_FIELD(f17), VOLT_DETAIL_FIELD(f18), VOLT_DETAIL_FIELD(f19),
        VOLT_DETAIL_FIELD(f20), VOLT_DETAIL_FIELD(f21), VOLT_DETAIL_FIELD(f22));
  } else if constexpr (count == 24) {
    auto&& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19,
            f20, f21, f22, f23]
        = std::forward<Aggregate>(aggregate);
    return std::forward<Visitor>(visitor)(
        VOLT_DETAIL_FIELD(f0), VOLT_DETAIL_FIELD(f1), VOLT_DETAIL_FIELD(f2), VOLT_DETAIL_FIELD(f3),
        VOLT_DETAIL_FIELD(f4), VOLT_DETAIL_FIELD(f5), VOLT_DETAIL_FIELD(f6), VOLT_DETAIL_FIELD(f7),
        VOLT_DETAIL_FIELD(f8), VOLT_DETAIL_FIELD(f9), VOLT_DETAIL_FIELD(f10), VOLT_DETAIL_FIELD(f11),
        VOLT_DETAIL_FIELD(f12), VOLT_DETAIL_FIELD(f13), VOLT_DETAIL_FIELD(f14), VOLT_DETAIL_FIELD(f15),
        VOLT_DETAIL_FIELD(f16), VOLT_DETAIL_FIELD(f17), VOLT_DETAIL_FIELD(f18), VOLT_DETAIL_FIELD(f19),
        VOLT_DETAIL_FIELD(f20), VOLT_DETAIL_FIELD(f21), VOLT_DETAIL_FIELD(f22), VOLT_DETAIL_FIELD(f23));
  } else if constexpr (count == 25) {
    auto&& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19,
            f20, f21, f22, f23, f24]
        = std::forward<Aggregate>(aggregate);
    return std::forward<Visitor>(visitor)(
        VOLT_DETAIL_FIELD(f0), VOLT_DETAIL_FIELD(f1), VOLT_DETAIL_FIELD(f2), VOLT_DETAIL_FIELD(f3),
        VOLT_DETAIL_FIELD(f4), VOLT_DETAIL_FIELD(f5), VOLT_DETAIL_FIELD(f6), VOLT_DETAIL_FIELD(f7),
        VOLT_DETAIL_FIELD(f8), VOLT_DETAIL_FIELD(f9), VOLT_DETAIL_FIELD(f10), VOLT_DETAIL_FIELD(f11),
        VOLT_DETAIL_FIELD(f12), VOLT_DETAIL_FIELD(f13), VOLT_DETAIL_FIELD(f14), VOLT_DETAIL_FIELD(f15),
        VOLT_DETAIL_FIELD(f16), VOLT_DETAIL_FIELD(f17), VOLT_DETAIL_FIELD(f18), VOLT_DETAIL_FIELD(f19),
        VOLT_DETAIL_FIELD(f20), VOLT_DETAIL_FIELD(f21), VOLT_DETAIL_FIELD(f22), VOLT_DETAIL_FIELD(f23),
        VOLT_DETAIL_FIELD(f24));
  } else if constexpr (count == 26) {
    auto&& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19,
            f20, f21, f22, f23, f24, f25]
        = std::forward<Aggregate>(aggregate);
    return std::forward<Visitor>(visitor)(
        VOLT_DETAIL_FIELD(f0), VOLT_DETAIL_FIELD(f1), VOLT_DETAIL_FIELD(f2), VOLT_DETAIL_FIELD(f3),
        VOLT_DETAIL_FIELD(f4), VOLT_DETAIL_FIELD(f5), VOLT_DETAIL_FIELD(f6), VOLT_DETAIL_FIELD(f7),
        VOLT_DETAIL_FIELD(f8), VOLT_DETAIL_FIELD(f9), VOLT_DETAIL_FIELD(f10), VOLT_DETAIL_FIELD(f11),
        VOLT_DETAIL_FIELD(f12), VOLT_DETAIL_FIELD(f13), VOLT_DETAIL_FIELD(f14), VOLT_DETAIL_FIELD(f15),
        VOLT_DETAIL_FIELD(f16), VOLT_DETAIL_FIELD(f17), VOLT_DETAIL_FIELD(f18), VOLT_DETAIL_FIELD(f19),
        VOLT_DETAIL_FIELD(f20), VOLT_DETAIL_FIELD(f21), VOLT_DETAIL_FIELD(f22), VOLT_DETAIL_FIELD(f23),
        VOLT_DETAIL_FIELD(f24), VOLT_DETAIL_FIELD(f25));
  } else if constexpr (count == 27) {
    auto&& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19,
            f20, f21, f22, f23, f24, f25, f26]
        = std::forward<Aggregate>(aggregate);
    return std::forward<Visitor>(visitor)(
        VOLT_DETAIL_FIELD(f0), VOLT_DETAIL_FIELD(f1), VOLT_DETAIL_FIELD(f2), VOLT_DETAIL_FIELD(f3),
        VOLT_DETAIL_FIELD(f4), VOLT_DETAIL_FIELD(f5), VOLT_DETAIL_FIELD(f6), VOLT_DETAIL_FIELD(f7),
        VOLT_DETAIL_FIELD(f8), VOLT_DETAIL_FIELD(f9), VOLT_DETAIL_FIELD(f10), VOLT_DETAIL_FIELD(f11),
        VOLT_DETAIL_FIELD(f12), VOLT_DETAIL_FIELD(f13), VOLT_DETAIL_FIELD(f14), VOLT_DETAIL_FIELD(f15),
        VOLT_DETAIL_FIELD(f16), VOLT_DETAIL_FIELD(f17), VOLT_DETAIL_FIELD(f18), VOLT_DETAIL_FIELD(f19),
        VOLT_DETAIL_FIELD(f20), VOLT_DETAIL_FIELD(f21), VOLT_DETAIL_FIELD(f22), VOLT_DETAIL_FIELD(f23),
        VOLT_DETAIL_FIELD(f24), VOLT_DETAIL_FIELD(f25), VOLT_DETAIL_FIELD(f26));
  } else if constexpr (count == 28) {
    auto&& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19,
            f20, f21, f22, f23, f24, f25, f26, f27]
        = std::forward<Aggregate>(aggregate);
    return std::forward<Visitor>(visitor)(
        VOLT_DETAIL_FIELD(f0), VOLT_DETAIL_FIELD(f1), VOLT_DETAIL_FIELD(f2), VOLT_DETAIL_FIELD(f3),
        VOLT_DETAIL_FIELD(f4), VOLT_DETAIL_FIELD(f5), VOLT_DETAIL_FIELD(f6), VOLT_DETAIL_FIELD(f7),
        VOLT_DETAIL_FIELD(f8), VOLT_DETAIL_FIELD(f9), VOLT_DETAIL_FIELD(f10), VOLT_DETAIL_FIELD(f11),
        VOLT_DETAIL_FIELD(f12), VOLT_DETAIL_FIELD(f13), VOLT_DETAIL_FIELD(f14), VOLT_DETAIL_FIELD(f15),
        VOLT_DETAIL_FIELD(f16), VOLT_DETAIL_FIELD(f17), VOLT_DETAIL_FIELD(f18), VOLT_DETAIL_FIELD(f19),
        VOLT_DETAIL_FIELD(f20), VOLT_DETAIL_FIELD(f21), VOLT_DETAIL_FIELD(f22), VOLT_DETAIL_FIELD(f23),
        VOLT_DETAIL_FIELD(f24), VOLT_DETAIL_FIELD(f25), VOLT_DETAIL_FIELD(f26), VOLT_DETAIL_FIELD(f27));
  } else if constexpr (count == 29) {
    auto&& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19,
            f20, f21, f22, f23, f24, f25, f26, f27, f28]
        = std::forward<Aggregate>(aggregate);
    return std::forward<Visitor>(visitor)(
        VOLT_DETAIL_FIELD(f0), VOLT_DETAIL_FIELD(f1), VOLT_DETAIL_FIELD(f2), VOLT_DETAIL_FIELD(f3),
        VOLT_DETAIL_FIELD(f4), VOLT_DETAIL_FIELD(f5), VOLT_DETAIL_FIELD(f6), VOLT_DETAIL_FIELD(f7),
        VOLT_DETAIL_FIELD(f8), VOLT_DETAIL_FIELD(f9), VOLT_DETAIL_FIELD(f10), VOLT_DETAIL_FIELD(f11),
        VOLT_DETAIL_FIELD(f12), VOLT_DETAIL_FIELD(f13), VOLT_DETAIL_FIELD(f14), VOLT_DETAIL_FIELD(f15),
        VOLT_DETAIL_FIELD(f16), VOLT_DETAIL_FIELD(f17), VOLT_DETAIL_FIELD(f18), VOLT_DETAIL_FIELD(f19),
        VOLT_DETAIL_FIELD(f20), VOLT_DETAIL_FIELD(f21), VOLT_DETAIL_FIELD(f22), VOLT_DETAIL_FIELD(f23),
        VOLT_DETAIL_FIELD(f24), VOLT_DETAIL_FIELD(f25), VOLT_DETAIL_FIELD(f26), VOLT_DETAIL_FIELD(f27),
        VOLT_DETAIL_FIELD(f28));
  } else if constexpr (count == 30) {
    auto&& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19,
            f20, f21, f22, f23, f24, f25, f26, f27, f28, f29]
        = std::forward<Aggregate>(aggregate);
    return std::forward<Visitor>(visitor)(
        VOLT_DETAIL_FIELD(f0), VOLT_DETAIL_FIELD(f1), VOLT_DETAIL_FIELD(f2), VOLT_DETAIL_FIELD(f3),
        VOLT_DETAIL_FIELD(f4), VOLT_DETAIL_FIELD(f5), VOLT_DETAIL_FIELD(f6), VOLT_DETAIL_FIELD(f7),
        VOLT_DETAIL_FIELD(f8), VOLT_DETAIL_FIELD(f9), VOLT_DETAIL_FIELD(f10), VOLT_DETAIL_FIELD(f11),
        VOLT_DETAIL_FIELD(f12), VOLT_DETAIL_FIELD(f13), VOLT_DETAIL_FIELD(f14), VOLT_DETAIL_FIELD(f15),
        VOLT_DETAIL_FIELD(f16), VOLT_DETAIL_FIELD(f17), VOLT_DETAIL_FIELD(f18), VOLT_DETAIL_FIELD(f19),
        VOLT_DETAIL_FIELD(f20), VOLT_DETAIL_FIELD(f21), VOLT_DETAIL_FIELD(f22), VOLT_DETAIL_FIELD(f23),
        VOLT_DETAIL_FIELD(f24), VOLT_DETAIL_FIELD(f25), VOLT_DETAIL_FIELD(f26), VOLT_DETAIL_FIELD(f27),
        VOLT_DETAIL_FIELD(f28), VOLT_DETAIL_FIELD(f29));
  } else if constexpr (count == 31) {
    auto&& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19,
            f20, f21, f22, f23, f24, f25, f26, f27, f28, f29, f30]
        = std::forward<Aggregate>(aggregate);
    return std::forward<Visitor>(visitor)(
        VOLT_DETAIL_FIELD(f0), VOLT_DETAIL_FIELD(f1), VOLT_DETAIL_FIELD(f2), VOLT_DETAIL_FIELD(f3),
        VOLT_DETAIL_FIELD(f4), VOLT_DETAIL_FIELD(f5), VOLT_DETAIL_FIELD(f6), VOLT_DETAIL_FIELD(f7),
        VOLT_DETAIL_FIELD(f8), VOLT_DETAIL_FIELD(f9), VOLT_DETAIL_FIELD(f10), VOLT_DETAIL_FIELD(f11),
        VOLT_DETAIL_FIELD(f12), VOLT_DETAIL_FIELD(f13), VOLT_DETAIL_FIELD(f14), VOLT_DETAIL_FIELD(f15),
        VOLT_DETAIL_FIELD(f16), VOLT_DETAIL_FIELD(f17), VOLT_DETAIL_FIELD(f18), VOLT_DETAIL_FIELD(f19),
        VOLT_DETAIL_FIELD(f20), VOLT_DETAIL_FIELD(f21), VOLT_DETAIL_FIELD(f22), VOLT_DETAIL_FIELD(f23),
        VOLT_DETAIL_FIELD(f24), VOLT_DETAIL_FIELD(f25), VOLT_DETAIL_FIELD(f26), VOLT_DETAIL_FIELD(f27),
        VOLT_DETAIL_FIELD(f28), VOLT_DETAIL_FIELD(f29), VOLT_DETAIL_FIELD(f30));
  } else if constexpr (count == 32) {
    auto&& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19,
            f20, f21, f22, f23, f24, f25, f26, f27, f28, f29, f30, f31]
        = std::forward<Aggregate>(aggregate);
    return std::forward<Visitor>(visitor)(
        VOLT_DETAIL_FIELD(f0), VOLT_DETAIL_FIELD(f1), VOLT_DETAIL_FIELD(f2), VOLT_DETAIL_FIELD(f3),
        VOLT_DETAIL_FIELD(f4), VOLT_DETAIL_FIELD(f5), VOLT_DETAIL_FIELD(f6), VOLT_DETAIL_FIELD(f7),
        VOLT_DETAIL_FIELD(f8), VOLT_DETAIL_FIELD(f9), VOLT_DETAIL_FIELD(f10), VOLT_DETAIL_FIELD(f11),
        VOLT_DETAIL_FIELD(f12), VOLT_DETAIL_FIELD(f13), VOLT_DETAIL_FIELD(f14), VOLT_DETAIL_FIELD(f15),
        VOLT_DETAIL_FIELD(f16), VOLT_DETAIL_FIELD(f17), VOLT_DETAIL_FIELD(f18), VOLT_DETAIL_FIELD(f19),
        VOLT_DETAIL_FIELD(f20), VOLT_DETAIL_FIELD(f21), VOLT_DETAIL_FIELD(f22), VOLT_DETAIL_FIELD(f23),
        VOLT_DETAIL_FIELD(f24), VOLT_DETAIL_FIELD(f25), VOLT_DETAIL_FIELD(f26), VOLT_DETAIL_FIELD(f27),
        VOLT_DETAIL_FIELD(f28), VOLT_DETAIL_FIELD(f29), VOLT_DETAIL_FIELD(f30), VOLT_DETAIL_FIELD(f31));
  }
}

#undef VOLT_DETAIL_FIELD

/// The fields' types as `Aggregate&&` would forward them: value members as their (cv-qualified) type,
/// reference members as lvalue references. Wrapped in volt::reflect::type_list.
template <reflectable Aggregate>
using field_types = decltype(with_fields(std::declval<Aggregate>(), detail::collect_field_types{}));

}  // namespace volt::reflect

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

// The macros of this header, defined here at namespace scope and undefined right after with_fields:
// * VOLT_DETAIL_FIELD(fN): the structured binding fN of with_fields, forwarded by detail::forward_field. A
//   macro because forward_field needs `decltype(fN)`, which for a structured binding is the member's declared
//   type (how a reference member is told from a value member) and which only the binding's own name gives: a
//   function taking the binding would see an lvalue of the member's type.
// * VOLT_DETAIL_FIELDS_n(M): M(f0), ..., M(fn-1), each list the one before it plus one name.
// * VOLT_DETAIL_ARITY(n): with_fields' branch for n fields: bind them, call the visitor with them forwarded.
#define VOLT_DETAIL_FIELD(field) ::volt::reflect::detail::forward_field<Aggregate, decltype(field)>(field)
#define VOLT_DETAIL_NAME(field) field
#define VOLT_DETAIL_FIELDS_1(M) M(f0)
#define VOLT_DETAIL_FIELDS_2(M) VOLT_DETAIL_FIELDS_1(M), M(f1)
#define VOLT_DETAIL_FIELDS_3(M) VOLT_DETAIL_FIELDS_2(M), M(f2)
#define VOLT_DETAIL_FIELDS_4(M) VOLT_DETAIL_FIELDS_3(M), M(f3)
#define VOLT_DETAIL_FIELDS_5(M) VOLT_DETAIL_FIELDS_4(M), M(f4)
#define VOLT_DETAIL_FIELDS_6(M) VOLT_DETAIL_FIELDS_5(M), M(f5)
#define VOLT_DETAIL_FIELDS_7(M) VOLT_DETAIL_FIELDS_6(M), M(f6)
#define VOLT_DETAIL_FIELDS_8(M) VOLT_DETAIL_FIELDS_7(M), M(f7)
#define VOLT_DETAIL_FIELDS_9(M) VOLT_DETAIL_FIELDS_8(M), M(f8)
#define VOLT_DETAIL_FIELDS_10(M) VOLT_DETAIL_FIELDS_9(M), M(f9)
#define VOLT_DETAIL_FIELDS_11(M) VOLT_DETAIL_FIELDS_10(M), M(f10)
#define VOLT_DETAIL_FIELDS_12(M) VOLT_DETAIL_FIELDS_11(M), M(f11)
#define VOLT_DETAIL_FIELDS_13(M) VOLT_DETAIL_FIELDS_12(M), M(f12)
#define VOLT_DETAIL_FIELDS_14(M) VOLT_DETAIL_FIELDS_13(M), M(f13)
#define VOLT_DETAIL_FIELDS_15(M) VOLT_DETAIL_FIELDS_14(M), M(f14)
#define VOLT_DETAIL_FIELDS_16(M) VOLT_DETAIL_FIELDS_15(M), M(f15)
#define VOLT_DETAIL_FIELDS_17(M) VOLT_DETAIL_FIELDS_16(M), M(f16)
#define VOLT_DETAIL_FIELDS_18(M) VOLT_DETAIL_FIELDS_17(M), M(f17)
#define VOLT_DETAIL_FIELDS_19(M) VOLT_DETAIL_FIELDS_18(M), M(f18)
#define VOLT_DETAIL_FIELDS_20(M) VOLT_DETAIL_FIELDS_19(M), M(f19)
#define VOLT_DETAIL_FIELDS_21(M) VOLT_DETAIL_FIELDS_20(M), M(f20)
#define VOLT_DETAIL_FIELDS_22(M) VOLT_DETAIL_FIELDS_21(M), M(f21)
#define VOLT_DETAIL_FIELDS_23(M) VOLT_DETAIL_FIELDS_22(M), M(f22)
#define VOLT_DETAIL_FIELDS_24(M) VOLT_DETAIL_FIELDS_23(M), M(f23)
#define VOLT_DETAIL_FIELDS_25(M) VOLT_DETAIL_FIELDS_24(M), M(f24)
#define VOLT_DETAIL_FIELDS_26(M) VOLT_DETAIL_FIELDS_25(M), M(f25)
#define VOLT_DETAIL_FIELDS_27(M) VOLT_DETAIL_FIELDS_26(M), M(f26)
#define VOLT_DETAIL_FIELDS_28(M) VOLT_DETAIL_FIELDS_27(M), M(f27)
#define VOLT_DETAIL_FIELDS_29(M) VOLT_DETAIL_FIELDS_28(M), M(f28)
#define VOLT_DETAIL_FIELDS_30(M) VOLT_DETAIL_FIELDS_29(M), M(f29)
#define VOLT_DETAIL_FIELDS_31(M) VOLT_DETAIL_FIELDS_30(M), M(f30)
#define VOLT_DETAIL_FIELDS_32(M) VOLT_DETAIL_FIELDS_31(M), M(f31)
#define VOLT_DETAIL_ARITY(n)                                                                  \
  else if constexpr (count == n) {                                                           \
    auto&& [VOLT_DETAIL_FIELDS_##n(VOLT_DETAIL_NAME)] = std::forward<Aggregate>(aggregate);  \
    return std::forward<Visitor>(visitor)(VOLT_DETAIL_FIELDS_##n(VOLT_DETAIL_FIELD));        \
  }

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
  }
  VOLT_DETAIL_ARITY(1) VOLT_DETAIL_ARITY(2) VOLT_DETAIL_ARITY(3) VOLT_DETAIL_ARITY(4)
  VOLT_DETAIL_ARITY(5) VOLT_DETAIL_ARITY(6) VOLT_DETAIL_ARITY(7) VOLT_DETAIL_ARITY(8)
  VOLT_DETAIL_ARITY(9) VOLT_DETAIL_ARITY(10) VOLT_DETAIL_ARITY(11) VOLT_DETAIL_ARITY(12)
  VOLT_DETAIL_ARITY(13) VOLT_DETAIL_ARITY(14) VOLT_DETAIL_ARITY(15) VOLT_DETAIL_ARITY(16)
  VOLT_DETAIL_ARITY(17) VOLT_DETAIL_ARITY(18) VOLT_DETAIL_ARITY(19) VOLT_DETAIL_ARITY(20)
  VOLT_DETAIL_ARITY(21) VOLT_DETAIL_ARITY(22) VOLT_DETAIL_ARITY(23) VOLT_DETAIL_ARITY(24)
  VOLT_DETAIL_ARITY(25) VOLT_DETAIL_ARITY(26) VOLT_DETAIL_ARITY(27) VOLT_DETAIL_ARITY(28)
  VOLT_DETAIL_ARITY(29) VOLT_DETAIL_ARITY(30) VOLT_DETAIL_ARITY(31) VOLT_DETAIL_ARITY(32)
}

#undef VOLT_DETAIL_ARITY
#undef VOLT_DETAIL_FIELDS_32
#undef VOLT_DETAIL_FIELDS_31
#undef VOLT_DETAIL_FIELDS_30
#undef VOLT_DETAIL_FIELDS_29
#undef VOLT_DETAIL_FIELDS_28
#undef VOLT_DETAIL_FIELDS_27
#undef VOLT_DETAIL_FIELDS_26
#undef VOLT_DETAIL_FIELDS_25
#undef VOLT_DETAIL_FIELDS_24
#undef VOLT_DETAIL_FIELDS_23
#undef VOLT_DETAIL_FIELDS_22
#undef VOLT_DETAIL_FIELDS_21
#undef VOLT_DETAIL_FIELDS_20
#undef VOLT_DETAIL_FIELDS_19
#undef VOLT_DETAIL_FIELDS_18
#undef VOLT_DETAIL_FIELDS_17
#undef VOLT_DETAIL_FIELDS_16
#undef VOLT_DETAIL_FIELDS_15
#undef VOLT_DETAIL_FIELDS_14
#undef VOLT_DETAIL_FIELDS_13
#undef VOLT_DETAIL_FIELDS_12
#undef VOLT_DETAIL_FIELDS_11
#undef VOLT_DETAIL_FIELDS_10
#undef VOLT_DETAIL_FIELDS_9
#undef VOLT_DETAIL_FIELDS_8
#undef VOLT_DETAIL_FIELDS_7
#undef VOLT_DETAIL_FIELDS_6
#undef VOLT_DETAIL_FIELDS_5
#undef VOLT_DETAIL_FIELDS_4
#undef VOLT_DETAIL_FIELDS_3
#undef VOLT_DETAIL_FIELDS_2
#undef VOLT_DETAIL_FIELDS_1
#undef VOLT_DETAIL_NAME
#undef VOLT_DETAIL_FIELD

/// The fields' types as `Aggregate&&` would forward them: value members as their (cv-qualified) type,
/// reference members as lvalue references. Wrapped in volt::reflect::type_list.
template <reflectable Aggregate>
using field_types = decltype(with_fields(std::declval<Aggregate>(), detail::collect_field_types{}));

}  // namespace volt::reflect

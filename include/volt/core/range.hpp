/// \file
/// The range behind a data argument of the Trainer or Fabric, its batch type and its size; implementation, no
/// public API.
///
/// A data argument is a range of batches, or something that points to one (torch::data::make_data_loader
/// returns a std::unique_ptr to the loader).
#pragma once

#include <cstdint>
#include <iterator>
#include <optional>
#include <type_traits>
#include <utility>

namespace volt::detail {

/// What std::ranges::range checks (begin and end on an lvalue, members or found by argument-dependent lookup),
/// without <ranges>, which would add 3,500 lines to every program that includes volt.
namespace range_lookup {
using std::begin;
using std::end;
template <class Type>
concept range = requires(Type& value) {
  begin(value);
  end(value);
};
template <range Type>
using reference_t = decltype(*begin(std::declval<Type&>()));
}  // namespace range_lookup

/// The range to iterate for a data argument: the argument itself, or what it points to
/// (torch::data::make_data_loader returns a std::unique_ptr to the loader).
template <class Data>
decltype(auto) as_range(Data& data) {
  if constexpr (requires { std::begin(data); }) {
    return (data);
  } else {
    return (*data);
  }
}

/// The batch type a data argument yields (what dereferencing its range's iterator gives, without cv-ref).
template <class Data>
using batch_t = std::remove_cvref_t<decltype(*std::begin(as_range(std::declval<Data&>())))>;

/// The number of batches of a data argument when its range can tell (std::size); nullopt otherwise.
template <class Data>
std::optional<std::int64_t> size_of(Data& data) {
  auto&& range = as_range(data);
  if constexpr (requires { std::size(range); }) {
    return static_cast<std::int64_t>(std::size(range));
  } else {
    return std::nullopt;
  }
}

}  // namespace volt::detail

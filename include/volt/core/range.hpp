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

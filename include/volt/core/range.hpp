/// \file
/// What the Trainer and Fabric accept as data: a range of batches, or a pointer to one (the std::unique_ptr
/// that torch::data::make_data_loader returns).
#pragma once

#include <cstdint>
#include <iterator>
#include <optional>
#include <type_traits>
#include <utility>

namespace volt::detail {

/// The range to iterate for a data argument: the argument itself, or what it points to.
template <class Data>
decltype(auto) as_range(Data& data) {
  if constexpr (requires { std::begin(data); }) {
    return (data);
  } else {
    return (*data);
  }
}

/// The batch type a data argument yields.
template <class Data>
using batch_t = std::remove_cvref_t<decltype(*std::begin(as_range(std::declval<Data&>())))>;

/// The number of batches of a data argument when its range knows it.
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

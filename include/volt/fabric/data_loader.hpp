// volt::DeviceDataLoader: what fabric.setup_dataloaders(loader) returns, a view of a range of batches that
// yields every batch moved to Fabric's device (Lightning's _FabricDataLoader with move_to_device=True).
#pragma once

#include <volt/transfer/batch_to_device.hpp>

#include <torch/torch.h>

#include <cstddef>
#include <iterator>
#include <optional>
#include <type_traits>
#include <utility>

namespace volt {

namespace detail {

/// The range behind a data argument: the argument, or what it points to (torch::data::make_data_loader
/// returns a std::unique_ptr to the loader).
template <class Data>
decltype(auto) data_range(Data& data) {
  if constexpr (requires { std::begin(data); }) {
    return (data);
  } else {
    return (*data);
  }
}

}  // namespace detail

/// A view of `Data` (a range of batches, or a pointer to one) that yields each batch moved to `device`
/// with volt::batch_to_device. Iterating it iterates the underlying loader (so a shuffling loader shuffles
/// per pass). `Data` must outlive the view. size() is available when the underlying range has one.
template <class Data>
class DeviceDataLoader {
  using Range = std::remove_reference_t<decltype(detail::data_range(std::declval<Data&>()))>;
  using BaseIterator = decltype(std::begin(std::declval<Range&>()));
  using BaseSentinel = decltype(std::end(std::declval<Range&>()));

 public:
  using batch_type = std::remove_cvref_t<decltype(*std::declval<BaseIterator&>())>;

  DeviceDataLoader(Data& data, torch::Device device) : data_(&data), device_(device) {}

  class iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = batch_type;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = batch_type;

    iterator() = default;
    iterator(BaseIterator base, torch::Device device) : base_(std::move(base)), device_(device) {}
    /// The current batch on the device (a new copy per dereference).
    batch_type operator*() const { return batch_to_device(*base_, device_); }
    iterator& operator++() {
      ++base_;
      return *this;
    }
    void operator++(int) { ++*this; }
    friend bool operator==(const iterator& it, const BaseSentinel& end) { return it.base_ == end; }
    bool operator==(const iterator& other) const { return base_ == other.base_; }

   private:
    mutable BaseIterator base_{};
    torch::Device device_{torch::kCPU};
  };

  iterator begin() { return iterator(std::begin(detail::data_range(*data_)), device_); }
  auto end() {
    if constexpr (std::is_same_v<BaseIterator, BaseSentinel>) {
      return iterator(std::end(detail::data_range(*data_)), device_);
    } else {
      return std::end(detail::data_range(*data_));
    }
  }
  std::size_t size() const
    requires requires(Range& range) { std::size(range); }
  {
    return static_cast<std::size_t>(std::size(detail::data_range(*data_)));
  }
  torch::Device device() const { return device_; }

 private:
  Data* data_;
  torch::Device device_;
};

}  // namespace volt

/// \file
/// volt::DeviceDataLoader: what fabric.setup_dataloaders(loader) returns, batches moved to Fabric's device.
///
/// A view of a range of batches that yields every batch moved to Fabric's device (Lightning's
/// _FabricDataLoader with move_to_device=True).
#pragma once

#include <volt/core/range.hpp>
#include <volt/transfer/batch_to_device.hpp>
#include <volt/transfer/memory_format.hpp>

#include <torch/torch.h>

#include <cstddef>
#include <iterator>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

namespace volt {

/// A view of `Data` (a range of batches, or a pointer to one) that yields each batch moved to `device`
/// with volt::batch_to_device. Iterating it iterates the underlying loader (so a shuffling loader shuffles
/// per pass). `Data` must outlive the view. size() is available when the underlying range has one.
template <class Data>
class DeviceDataLoader {
  using Range = std::remove_reference_t<decltype(detail::as_range(std::declval<Data&>()))>;
  using BaseIterator = decltype(std::begin(std::declval<Range&>()));
  using BaseSentinel = decltype(std::end(std::declval<Range&>()));

 public:
  /// The batch type of the underlying range (what each dereference returns, on the device).
  using batch_type = detail::batch_t<Data>;

  /// A view of `data` yielding batches on `device`; Fabric::setup_dataloaders makes it with Fabric's device.
  /// `channels_last`, when given and true at the time a batch is read, puts its 4-D floating tensors in
  /// channels-last strides (Fabric's memory_format).
  DeviceDataLoader(Data& data, torch::Device device, std::shared_ptr<const bool> channels_last = nullptr)
      : data_(&data), device_(device), channels_last_(std::move(channels_last)) {}

  /// A single-pass input iterator over the underlying range that moves each batch to the device when
  /// dereferenced.
  class iterator {
   public:
    using iterator_category = std::input_iterator_tag;  ///< Single pass.
    using value_type = batch_type;                      ///< A batch on the device.
    using difference_type = std::ptrdiff_t;             ///< Required by the iterator concepts.
    using pointer = void;                               ///< No operator->.
    using reference = batch_type;                       ///< Dereferencing returns a new batch by value.

    /// A singular iterator (only for the iterator concepts; do not dereference it).
    iterator() = default;
    /// Wraps an iterator of the underlying range.
    iterator(BaseIterator base, torch::Device device, std::shared_ptr<const bool> channels_last = nullptr)
        : base_(std::move(base)), device_(device), channels_last_(std::move(channels_last)) {}
    /// The current batch on the device (a new copy per dereference).
    batch_type operator*() const {
      if (channels_last_ && *channels_last_) return detail::batch_to_channels_last(batch_to_device(*base_, device_));
      return batch_to_device(*base_, device_);
    }
    /// Advances the underlying iterator.
    iterator& operator++() {
      ++base_;
      return *this;
    }
    /// Advances the underlying iterator (returns nothing, as input iterators may).
    void operator++(int) { ++*this; }
    /// Whether `it` reached the underlying range's end.
    friend bool operator==(const iterator& it, const BaseSentinel& end) { return it.base_ == end; }
    /// Whether both wrap the same underlying position.
    bool operator==(const iterator& other) const { return base_ == other.base_; }

   private:
    mutable BaseIterator base_{};
    torch::Device device_{torch::kCPU};
    std::shared_ptr<const bool> channels_last_{};
  };

  /// Starts a pass over the underlying range (a torch::data loader starts a new epoch).
  iterator begin() { return iterator(std::begin(detail::as_range(*data_)), device_, channels_last_); }
  /// The end: an iterator, or the underlying range's sentinel when its end type differs.
  auto end() {
    if constexpr (std::is_same_v<BaseIterator, BaseSentinel>) {
      return iterator(std::end(detail::as_range(*data_)), device_, channels_last_);
    } else {
      return std::end(detail::as_range(*data_));
    }
  }
  /// The underlying range's number of batches; only when the range has std::size.
  std::size_t size() const
    requires requires(Range& range) { std::size(range); }
  {
    return static_cast<std::size_t>(std::size(detail::as_range(*data_)));
  }
  /// The device batches are moved to.
  torch::Device device() const { return device_; }

 private:
  Data* data_;
  torch::Device device_;
  std::shared_ptr<const bool> channels_last_;
};

}  // namespace volt

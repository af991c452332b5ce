/// \file
/// volt::SizedRange and volt::sized: give a range of batches the size it cannot tell the Trainer.
///
/// Any range of batches works with the Trainer as it is; these add what a range may lack.
#pragma once

#include <cstdint>
#include <iterator>
#include <memory>
#include <type_traits>

namespace volt {

/// A view of `range` that also knows how many batches it yields, for ranges that cannot tell (a
/// torch::data loader): the progress bar shows a total and ETA from the first epoch, and fractional
/// limit_train_batches / val_check_interval work. `range` must outlive the view.
template <class Range>
class SizedRange {
 public:
  /// Wraps `range`, declaring that one pass yields `size` batches. The size is not checked against the
  /// batches the range really yields.
  SizedRange(Range& range, std::int64_t size) : range_(&range), size_(size) {}
  /// Starts a pass over the wrapped range (a torch::data loader starts a new epoch).
  auto begin() { return std::begin(*range_); }
  /// The wrapped range's end.
  auto end() { return std::end(*range_); }
  /// The declared number of batches per pass.
  std::int64_t size() const { return size_; }

 private:
  Range* range_;
  std::int64_t size_;
};

/// `volt::sized(loader, batches)`: a SizedRange over `data`, which may be a range or a pointer to one
/// (the std::unique_ptr from torch::data::make_data_loader). `data` must outlive the view.
template <class Data>
auto sized(Data& data, std::int64_t size) {
  if constexpr (requires { std::begin(data); }) {
    return SizedRange<Data>(data, size);
  } else {
    return SizedRange<std::remove_reference_t<decltype(*data)>>(*data, size);
  }
}

}  // namespace volt

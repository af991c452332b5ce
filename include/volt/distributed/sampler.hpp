/// \file
/// Giving each rank its share of the data: volt::DistributedSampler, volt::per_rank and the Trainer's split.
///
/// volt::DistributedSampler is PyTorch's DistributedSampler as a torch::data sampler: rank r of n takes the
/// indices r, r + n, r + 2n, ... of the (optionally shuffled with seed + epoch) dataset indices, padded by
/// repeating from the start so every rank gets ceil(size / n) samples (or cut to floor(size / n) with
/// drop_last). Build a data loader with it and the Trainer uses the loader as it is:
///
/// ```
/// auto loader = torch::data::make_data_loader(dataset.map(Stack<>()),
///     volt::DistributedSampler(dataset.size().value(), {.num_replicas = trainer.world_size(),
///                                                       .rank = trainer.global_rank(), .shuffle = true}),
///     torch::data::DataLoaderOptions(128));
/// ```
///
/// The epoch advances by itself each time the loader starts a new pass (reset), so shuffles differ per epoch
/// as with Lightning's set_epoch; set_epoch() sets it explicitly.
///
/// Any other data given to a distributed Trainer is split by batch: rank r of n trains on batches r, r + n, ...
/// of each group of n consecutive batches; an incomplete last group is left out so all ranks take the same
/// number of steps (volt::detail::RankShard). Data wrapped with volt::per_rank is used as it is.
#pragma once

#include <volt/core/linkage.hpp>
#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace volt {

/// Options of DistributedSampler (PyTorch's names and defaults).
struct DistributedSamplerOptions {
  /// The number of ranks sharing the data (usually trainer.world_size()); >= 1.
  std::int64_t num_replicas = 1;
  /// This rank's index in [0, num_replicas) (usually trainer.global_rank()).
  std::int64_t rank = 0;
  /// Shuffle the indices each pass, the same way on every rank (a permutation seeded with seed + epoch).
  bool shuffle = true;
  /// The base seed of the shuffle; every rank must use the same one.
  std::uint64_t seed = 0;
  /// Drop the tail that does not divide evenly by num_replicas instead of padding with repeated indices.
  bool drop_last = false;
};

/// A torch::data sampler that yields this rank's share of `size` indices (see the file comment). Uses no
/// collective: each rank computes its share alone, so all ranks must use the same size, seed and options
/// apart from rank.
class DistributedSampler : public torch::data::samplers::Sampler<std::vector<std::size_t>> {
 public:
  /// A sampler over indices 0..size-1 for epoch 0. Throws std::invalid_argument when num_replicas < 1 or
  /// rank is not in [0, num_replicas) (PyTorch's message).
  DistributedSampler(std::size_t size, DistributedSamplerOptions options = {});

  /// Starts a pass: rebuilds this rank's indices for the current epoch, then advances the epoch for the next pass.
  void reset(c10::optional<std::size_t> new_size = c10::nullopt) override;

  /// The next up to `batch_size` indices, or nullopt at the end of the pass.
  c10::optional<std::vector<std::size_t>> next(std::size_t batch_size) override;

  /// Writes the epoch and the position within the current pass (torch::data's sampler checkpointing).
  void save(torch::serialize::OutputArchive& archive) const override;
  /// Restores what save() wrote: rebuilds the indices for the saved epoch and resumes at the saved position.
  /// Throws what LibTorch's archive throws for missing entries.
  void load(torch::serialize::InputArchive& archive) override;

  /// The epoch the next reset() uses for shuffling.
  void set_epoch(std::uint64_t epoch) { epoch_ = epoch; }
  /// The epoch the next reset() uses (one more than the pass in progress, once a pass has started).
  std::uint64_t epoch() const { return epoch_; }
  /// This rank's number of samples per pass.
  std::size_t num_samples() const { return indices_.size(); }
  /// The indices of the current pass.
  const std::vector<std::size_t>& indices() const { return indices_; }

 private:
  void build();

  std::size_t size_;
  DistributedSamplerOptions options_;
  std::uint64_t epoch_ = 0;
  std::vector<std::size_t> indices_;
  std::size_t position_ = 0;
};

/// Marks data that already holds only this rank's share (each rank built its own), so a distributed Trainer
/// iterates it as it is instead of splitting it by batch. Holds a reference: `data` must outlive the view.
/// Every rank's share must give the same number of batches, or the ranks' collectives fall out of step.
template <class Data>
class PerRank {
 public:
  /// Wraps `data`: a range of batches, or a pointer to one (torch::data loaders).
  explicit PerRank(Data& data) : data_(&data) {}
  /// Starts a pass over the wrapped data.
  auto begin() { return std::begin(range()); }
  /// The wrapped data's end.
  auto end() { return std::end(range()); }
  /// The wrapped range's size, when it has one.
  auto size() const
    requires requires(Data& d) { std::size(d); }
  {
    return std::size(*data_);
  }

 private:
  decltype(auto) range() {
    if constexpr (requires { std::begin(*data_); }) {
      return (*data_);
    } else {
      return (**data_);
    }
  }
  Data* data_;
};

/// volt::per_rank(data): see PerRank.
template <class Data>
PerRank<Data> per_rank(Data& data) {
  return PerRank<Data>(data);
}

namespace detail {

template <class T>
struct is_per_rank : std::false_type {};
template <class Data>
struct is_per_rank<PerRank<Data>> : std::true_type {};

/// Whether `Data` is a torch::data loader (or a pointer to one) that already uses volt::DistributedSampler.
template <class T>
struct uses_distributed_sampler : std::false_type {};
template <class Dataset>
struct uses_distributed_sampler<torch::data::StatelessDataLoader<Dataset, DistributedSampler>> : std::true_type {};
template <class T>
struct uses_distributed_sampler<std::unique_ptr<T>> : uses_distributed_sampler<T> {};
template <class T>
struct uses_distributed_sampler<std::shared_ptr<T>> : uses_distributed_sampler<T> {};

/// A view of a range of batches that yields rank `rank`'s batches of each complete group of `replicas`
/// consecutive batches (works on single-pass ranges: it looks ahead to the end of the group).
template <class Range>
class RankShard {
  using BaseIterator = decltype(std::begin(std::declval<Range&>()));
  using BaseSentinel = decltype(std::end(std::declval<Range&>()));

 public:
  using value_type = std::remove_cvref_t<decltype(*std::declval<BaseIterator&>())>;

  RankShard(Range& range, std::int64_t replicas, std::int64_t rank) : range_(&range), replicas_(replicas), rank_(rank) {}

  class iterator {
   public:
    using value_type = RankShard::value_type;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    iterator(BaseIterator it, BaseSentinel end, std::int64_t replicas, std::int64_t rank)
        : it_(std::move(it)), end_(std::move(end)), replicas_(replicas), rank_(rank) {
      advance();
    }
    value_type& operator*() const { return *current_; }
    iterator& operator++() {
      advance();
      return *this;
    }
    void operator++(int) { advance(); }
    bool operator==(std::default_sentinel_t) const { return !current_; }

   private:
    void advance() {
      current_.reset();
      if (!it_) return;
      std::optional<value_type> mine;
      for (std::int64_t position = 0; position < replicas_; ++position) {
        if (*it_ == *end_) {
          it_.reset();
          return;
        }
        if (position == rank_) mine.emplace(**it_);
        ++*it_;
      }
      current_ = std::move(mine);
    }
    std::optional<BaseIterator> it_;
    std::optional<BaseSentinel> end_;
    std::int64_t replicas_ = 1;
    std::int64_t rank_ = 0;
    mutable std::optional<value_type> current_;
  };

  iterator begin() { return iterator(std::begin(*range_), std::end(*range_), replicas_, rank_); }
  std::default_sentinel_t end() { return {}; }
  /// The range this view splits.
  Range& base() const { return *range_; }
  std::size_t size() const
    requires requires(Range& r) { std::size(r); }
  {
    return std::size(*range_) / static_cast<std::size_t>(replicas_);
  }

 private:
  Range* range_;
  std::int64_t replicas_;
  std::int64_t rank_;
};

}  // namespace detail
}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/distributed/impl/sampler.ipp>
#endif

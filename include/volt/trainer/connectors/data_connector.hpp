/// \file
/// The data connector (Lightning's trainer/connectors/data_connector.py): how many batches of each data
/// argument a run uses (the limit_*_batches options, overfit_batches, fast_dev_run), the checks of those sizes
/// before training starts, data given as a loader factory (LoaderSource, requested again as
/// reload_dataloaders_every_n_epochs says) and the fixed order of a shuffling loader under overfit_batches.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/errors.hpp>
#include <volt/core/log.hpp>
#include <volt/core/python_format.hpp>
#include <volt/core/range.hpp>
#include <volt/distributed/sampler.hpp>
#include <volt/trainer/connectors/checkpoint_connector.hpp>
#include <volt/trainer/data.hpp>
#include <volt/trainer/options.hpp>
#include <volt/trainer/state.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace volt::detail {

/// Whether overfit_batches asks for something (a count or a fraction above 0).
VOLT_INLINE bool overfit_enabled(const TrainerOptions& options);

/// Lightning's _init_debugging_flags: overfit_batches replaces limit_train_batches and limit_val_batches;
/// fast_dev_run=N gives N training steps in one epoch and no sanity check.
VOLT_INLINE void apply_fast_dev_run(TrainerOptions& options);

/// How many batches of data of `total` batches (nullopt: size unknown) a limit allows; nullopt means all.
/// fast_dev_run caps every limit but those overfit_batches sets.
VOLT_INLINE std::optional<std::int64_t> batch_limit(const TrainerOptions& options, const BatchAmount& amount,
                                                    std::optional<std::int64_t> total, const char* name);

/// The batch limit of `data` for `amount` (see batch_limit).
template <class Data>
std::optional<std::int64_t> data_limit(const TrainerOptions& options, const BatchAmount& amount, Data& data,
                                       const char* name) {
  return batch_limit(options, amount, size_of(data), name);
}

/// Rounds a fraction-of-epoch interval to batches as Lightning does.
VOLT_INLINE std::int64_t batches_for(const BatchAmount& amount, std::int64_t total);

/// Checks, before training starts, the limits and intervals that depend on the data sizes (Lightning's
/// messages): a fraction that selects no batch, an integer val_check_interval longer than the epoch (refused,
/// as Lightning's fit_loop.setup_data does, whether or not validation data was given, unless
/// limit_val_batches is 0 or check_val_every_n_epoch is unset).
/// Lightning's refusal of a fractional limit that selects no batch of `size` batches ("train", "val").
VOLT_INLINE void check_fraction(const BatchAmount& amount, std::optional<std::int64_t> size, const char* stage);

VOLT_INLINE void check_data_sizes(const TrainerOptions& options, const TrainerState& state,
                                  std::optional<std::int64_t> train_size, std::optional<std::int64_t> val_size);

/// A data argument given as a factory: a callable that returns a loader (a range of batches or a pointer to
/// one) or a reference to one. The Trainer requests the loader when Lightning's loops call the matching
/// *_dataloader hook, and again every reload_dataloaders_every_n_epochs epochs; in between this is a range over
/// the current loader. `factory` must outlive the source.
template <class Factory>
class LoaderSource {
  using Result = std::invoke_result_t<Factory&>;
  static constexpr bool by_reference = std::is_lvalue_reference_v<Result>;

 public:
  /// What the factory returns, without reference.
  using loader_type = std::remove_cvref_t<Result>;

  explicit LoaderSource(Factory& factory) : factory_(&factory) {}

  /// Requests a new loader at `epoch` (the previous one is released first: its workers and memory).
  void load(std::int64_t epoch) {
    held_.reset();
    if constexpr (by_reference) {
      held_ = std::make_unique<Held>(&std::invoke(*factory_));
    } else {
      held_ = std::make_unique<Held>(Make{factory_});
    }
    ++loads_;
    loaded_at_epoch_ = epoch;
  }
  /// Whether a loader was requested.
  bool loaded() const { return held_ != nullptr; }
  /// How many loaders were requested.
  std::int64_t loads() const { return loads_; }
  /// The epoch that counts as the last request (Lightning's _last_*_dl_reload_epoch); nullopt: none that counts.
  std::optional<std::int64_t> counted_epoch() const { return counted_epoch_; }
  /// Makes the last request count (or, with nullopt, not count) for reload_dataloaders_every_n_epochs.
  void count_load(bool counts) { counted_epoch_ = counts ? std::optional<std::int64_t>(loaded_at_epoch_) : std::nullopt; }

  /// The current loader; throws std::logic_error before the first load.
  loader_type& loader() { return const_cast<loader_type&>(std::as_const(*this).loader()); }
  /// The current loader; throws std::logic_error before the first load.
  const loader_type& loader() const {
    if (!held_) throw std::logic_error("volt: a loader factory was iterated before its loader was requested");
    if constexpr (by_reference) {
      return **held_;
    } else {
      return *held_;
    }
  }
  /// Starts a pass over the current loader.
  auto begin() { return std::begin(as_range(loader())); }
  /// The current loader's end.
  auto end() { return std::end(as_range(loader())); }
  /// The current loader's number of batches, when it can tell (const for std::size; asking it changes nothing).
  std::size_t size() const
    requires requires(loader_type& l) { std::size(as_range(l)); }
  {
    return std::size(as_range(const_cast<LoaderSource&>(*this).loader()));
  }

 private:
  // Constructs the loader in place from the factory's result (loaders need not be movable).
  struct Make {
    Factory* factory;
    operator loader_type() const { return std::invoke(*factory); }  // NOLINT(google-explicit-constructor)
  };
  using Held = std::conditional_t<by_reference, std::remove_reference_t<Result>*, loader_type>;

  Factory* factory_;
  // On the heap, not in a std::optional: g++ 13 at -O3 reports an optional holding a loader's unique_ptr as
  // "may be used uninitialized" (-Wmaybe-uninitialized) where it cannot be.
  std::unique_ptr<Held> held_;
  std::int64_t loads_ = 0;
  std::int64_t loaded_at_epoch_ = 0;
  std::optional<std::int64_t> counted_epoch_{};
};

/// A callable that returns a loader, as opposed to a range or a pointer to one.
template <class Data>
concept loader_factory = std::invocable<Data&> && !requires(Data& data) { std::begin(data); } &&
                         !requires(Data& data) { *data; };

/// The data argument as the loops take it: a range as it is, a loader factory as a LoaderSource over it.
template <class Data>
decltype(auto) data_source(Data& data) {
  if constexpr (loader_factory<Data>) {
    return LoaderSource<Data>(data);
  } else {
    return (data);
  }
}

template <class T>
struct is_loader_source : std::false_type {};
template <class F>
struct is_loader_source<LoaderSource<F>> : std::true_type {};
template <class R>
struct is_loader_source<RankShard<R>> : is_loader_source<std::remove_cv_t<R>> {};

/// Whether the loops' data `Data` (possibly this rank's view) comes from a loader factory.
template <class Data>
inline constexpr bool from_factory = is_loader_source<std::remove_cvref_t<Data>>::value;

/// The LoaderSource behind the loops' data (`from_factory<Data>`).
template <class Data>
auto& loader_source(Data& data) {
  if constexpr (requires { data.base(); }) {
    return loader_source(data.base());
  } else {
    return data;
  }
}

template <class F>
struct uses_distributed_sampler<LoaderSource<F>> : uses_distributed_sampler<typename LoaderSource<F>::loader_type> {};
template <class F>
struct is_per_rank<LoaderSource<F>> : is_per_rank<typename LoaderSource<F>::loader_type> {};

/// Whether a loader of `source` is due at `epoch` (Lightning's setup_data guard with _should_reload_train_dl
/// and _should_reload_val_dl): none was requested yet, or `every` epochs have passed since the one that counts.
template <class Source>
bool reload_due(const Source& source, std::int64_t every, std::int64_t epoch) {
  if (!source.loaded()) return true;
  if (every <= 0) return false;
  const auto counted = source.counted_epoch();
  return !counted || epoch - *counted >= every;
}

/// Whether a pass over `T` draws a random order from LibTorch's default generator (a torch::data loader with a
/// RandomSampler, or a view of one).
template <class T>
struct shuffles : std::false_type {};
template <class Dataset>
struct shuffles<torch::data::StatelessDataLoader<Dataset, torch::data::samplers::RandomSampler>> : std::true_type {};
template <class T>
struct shuffles<std::unique_ptr<T>> : shuffles<T> {};
template <class T>
struct shuffles<std::shared_ptr<T>> : shuffles<T> {};
template <class R>
struct shuffles<SizedRange<R>> : shuffles<std::remove_cv_t<R>> {};
template <class R>
struct shuffles<RankShard<R>> : shuffles<std::remove_cv_t<R>> {};
template <class F>
struct shuffles<LoaderSource<F>> : shuffles<typename LoaderSource<F>::loader_type> {};

/// overfit_batches on a shuffling loader (Lightning's _resolve_overfit_batches): the warning, once per fit, and
/// every pass drawn with the same generator state, so each epoch yields the same batches.
class OverfitOrder {
 public:
  /// A new fit.
  void reset();

  /// Starts a pass over `range` (`prefix`: "train" or "val").
  template <class Range>
  auto begin(Range& range, const TrainerOptions& options, const char* prefix) {
    if constexpr (shuffles<std::remove_cvref_t<Range>>::value) {
      if (overfit_enabled(options)) {
        if (!warned_) {
          log::warn_rank_zero(std::string("You requested to overfit but enabled ") + prefix +
                              " dataloader shuffling. We are turning off the " + prefix +
                              " dataloader shuffling for you.");
          warned_ = true;
        }
        const torch::Tensor current = cpu_rng_state();
        if (!state_.defined()) state_ = current;
        set_cpu_rng_state(state_);
        auto it = std::begin(range);
        set_cpu_rng_state(current);
        return it;
      }
    }
    return std::begin(range);
  }

 private:
  torch::Tensor state_{};
  bool warned_ = false;
};

}  // namespace volt::detail

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/trainer/connectors/impl/data_connector.ipp>
#endif

/// \file
/// Definitions of the functions declared in volt/distributed/sampler.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt {

VOLT_INLINE void DistributedSampler::reset(c10::optional<std::size_t> new_size) {
  if (new_size) size_ = *new_size;
  build();
  ++epoch_;
}

VOLT_INLINE auto DistributedSampler::next(std::size_t batch_size) -> c10::optional<std::vector<std::size_t>> {
  if (position_ >= indices_.size()) return c10::nullopt;
  const auto end = std::min(indices_.size(), position_ + batch_size);
  std::vector<std::size_t> batch(indices_.begin() + static_cast<std::ptrdiff_t>(position_),
                                 indices_.begin() + static_cast<std::ptrdiff_t>(end));
  position_ = end;
  return batch;
}

VOLT_INLINE void DistributedSampler::save(torch::serialize::OutputArchive& archive) const {
  archive.write("epoch", torch::tensor(static_cast<std::int64_t>(epoch_)), /*is_buffer=*/true);
  archive.write("position", torch::tensor(static_cast<std::int64_t>(position_)), /*is_buffer=*/true);
}

VOLT_INLINE void DistributedSampler::load(torch::serialize::InputArchive& archive) {
  torch::Tensor epoch, position;
  archive.read("epoch", epoch, /*is_buffer=*/true);
  archive.read("position", position, /*is_buffer=*/true);
  epoch_ = static_cast<std::uint64_t>(epoch.item<std::int64_t>());
  build();
  position_ = static_cast<std::size_t>(position.item<std::int64_t>());
}

VOLT_INLINE void DistributedSampler::build() {
  const auto replicas = static_cast<std::size_t>(options_.num_replicas);
  std::vector<std::size_t> all(size_);
  if (options_.shuffle) {
    torch::Generator generator = at::detail::createCPUGenerator(options_.seed + epoch_);
    const auto order = torch::randperm(static_cast<std::int64_t>(size_), generator, torch::kLong);
    const auto* data = order.data_ptr<std::int64_t>();
    for (std::size_t i = 0; i < size_; ++i) all[i] = static_cast<std::size_t>(data[i]);
  } else {
    for (std::size_t i = 0; i < size_; ++i) all[i] = i;
  }
  std::size_t total = 0;
  if (options_.drop_last && size_ % replicas != 0) {
    total = (size_ / replicas) * replicas;
    all.resize(total);
  } else {
    total = (size_ + replicas - 1) / replicas * replicas;
    for (std::size_t i = 0; all.size() < total && size_ > 0; ++i) all.push_back(all[i % size_]);
  }
  indices_.clear();
  for (std::size_t i = static_cast<std::size_t>(options_.rank); i < total; i += replicas) indices_.push_back(all[i]);
  position_ = 0;
}

}  // namespace volt

namespace volt {

VOLT_INLINE DistributedSampler::DistributedSampler(std::size_t size, DistributedSamplerOptions options)
    : size_(size), options_(options) {
  if (options_.num_replicas < 1) {
    throw std::invalid_argument("DistributedSampler: num_replicas must be at least 1, got " +
                                std::to_string(options_.num_replicas));
  }
  if (options_.rank < 0 || options_.rank >= options_.num_replicas) {
    throw std::invalid_argument("Invalid rank " + std::to_string(options_.rank) + ", rank should be in the interval [0, " +
                                std::to_string(options_.num_replicas - 1) + "]");
  }
  build();
}

}  // namespace volt

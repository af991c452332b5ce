// Fashion-MNIST for the examples: Debian's dataset-fashion-mnist package (gzipped IDX files in
// /usr/share/datasets/fashion-mnist) unpacked once into a cache folder, held in memory, and served in
// batches by torch::data loaders.
#pragma once

#include <volt/volt.hpp>

#include <torch/torch.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace examples {

namespace fs = std::filesystem;

inline const char* const idx_files[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                                        "t10k-labels-idx1-ubyte"};

/// A folder holding the four uncompressed IDX files: `requested` if given (it must already hold them), else
/// $VOLT_FASHION_MNIST_DIR if set, else the cache folder, filled from Debian's package on first use. Throws
/// with install instructions when the data cannot be found.
inline fs::path fashion_mnist_folder(std::string requested) {
  if (const char* from_environment = std::getenv("VOLT_FASHION_MNIST_DIR");
      requested.empty() && from_environment != nullptr && *from_environment != '\0') {
    requested = from_environment;
  }
  auto complete = [](const fs::path& folder) {
    for (const char* name : idx_files) {
      if (!fs::exists(folder / name)) return false;
    }
    return true;
  };
  if (!requested.empty()) {
    if (!complete(requested)) {
      throw std::runtime_error("the data folder " + requested + " (--data-dir or VOLT_FASHION_MNIST_DIR) must hold "
                               "the uncompressed IDX files " +
                               "train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte and "
                               "t10k-labels-idx1-ubyte");
    }
    return requested;
  }
  const char* cache_home = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  const fs::path cache = cache_home != nullptr && *cache_home != '\0' ? fs::path(cache_home) / "volt" / "fashion-mnist"
                         : home != nullptr                           ? fs::path(home) / ".cache" / "volt" / "fashion-mnist"
                                                                     : fs::temp_directory_path() / "volt-fashion-mnist";
  if (complete(cache)) return cache;
  const fs::path package = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(package / "train-images-idx3-ubyte.gz")) {
    throw std::runtime_error(
        "Fashion-MNIST was not found. Install Debian's package:\n"
        "    sudo apt-get install dataset-fashion-mnist\n"
        "or pass --data-dir DIR with the four uncompressed IDX files (train-images-idx3-ubyte, ...).");
  }
  fs::create_directories(cache);
  for (const char* name : idx_files) {
    const auto target = cache / name;
    const auto partial = cache / (std::string(name) + ".partial");
    const std::string command = "gzip -dc '" + (package / (std::string(name) + ".gz")).string() + "' > '" +
                                partial.string() + "'";
    if (std::system(command.c_str()) != 0) throw std::runtime_error("could not unpack " + std::string(name) + " with gzip");
    fs::rename(partial, target);
  }
  std::cerr << "Unpacked Fashion-MNIST into " << cache << '\n';
  return cache;
}

/// Images (N x 1 x 28 x 28, normalised float) and labels (N, int64) served by index batches: each batch is
/// one index_select, not 128 small copies.
class InMemoryImages : public torch::data::datasets::BatchDataset<InMemoryImages, torch::data::Example<>> {
 public:
  InMemoryImages(torch::Tensor images, torch::Tensor labels) : images_(std::move(images)), labels_(std::move(labels)) {}

  torch::data::Example<> get_batch(c10::ArrayRef<size_t> indices) override {
    std::vector<std::int64_t> index(indices.begin(), indices.end());
    auto selected = torch::tensor(index, torch::kLong);
    return {images_.index_select(0, selected), labels_.index_select(0, selected)};
  }
  c10::optional<size_t> size() const override { return static_cast<size_t>(images_.size(0)); }

 private:
  torch::Tensor images_;
  torch::Tensor labels_;
};

struct FashionMnistSplits {
  InMemoryImages train;
  InMemoryImages val;
  InMemoryImages test;
};

/// Reads the IDX file `folder/name` (magic 2051: N x rows x columns images, scaled to [0, 1]; 2049: N labels,
/// int64), checking the magic, the sizes against `expected_count` and the file's length against its header.
/// Throws std::runtime_error naming the file and what is wrong (empty, gzipped, truncated, another kind).
inline torch::Tensor read_idx(const fs::path& folder, const char* name, std::int64_t expected_count) {
  const fs::path path = folder / name;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open the IDX file " + path.string());
  const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  const auto fail = [&](const std::string& what) {
    throw std::runtime_error("the IDX file " + path.string() + " (" + std::to_string(bytes.size()) + " bytes) " + what);
  };
  if (bytes.empty()) fail("is empty");
  if (bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f && static_cast<unsigned char>(bytes[1]) == 0x8b) {
    fail("is gzip-compressed: unpack it first (gunzip " + path.string() + ")");
  }
  const auto u32 = [&](std::size_t at) {
    std::uint32_t value = 0;
    for (std::size_t i = 0; i < 4; ++i) value = value << 8 | static_cast<unsigned char>(bytes[at + i]);
    return static_cast<std::int64_t>(value);
  };
  if (bytes.size() < 8) fail("is too short for an IDX header");
  const std::int64_t magic = u32(0);
  const bool images = magic == 2051;
  if (!images && magic != 2049) fail("is not an IDX file of images (magic 2051) or labels (2049): magic " + std::to_string(magic));
  const std::size_t header = images ? 16 : 8;
  if (bytes.size() < header) fail("is too short for an IDX header");
  const std::int64_t count = u32(4);
  const std::int64_t rows = images ? u32(8) : 1;
  const std::int64_t columns = images ? u32(12) : 1;
  if (count != expected_count || (images && (rows != 28 || columns != 28))) {
    fail("holds " + std::to_string(count) + (images ? " images of " + std::to_string(rows) + "x" + std::to_string(columns) : " labels") +
         ", expected " + std::to_string(expected_count) + (images ? " images of 28x28" : " labels"));
  }
  const auto expected_size = static_cast<std::uint64_t>(header) + static_cast<std::uint64_t>(count * rows * columns);
  if (bytes.size() != expected_size) {
    fail(std::string(bytes.size() < expected_size ? "is truncated" : "is longer than its header says") + ": expected " +
         std::to_string(expected_size) + " bytes");
  }
  auto data = torch::from_blob(const_cast<char*>(bytes.data()) + header, {count * rows * columns}, torch::kUInt8).clone();
  if (!images) {
    if (data.max().item<int>() > 9) fail("holds a label above 9");
    return data.to(torch::kLong);
  }
  return data.reshape({count, 1, rows, columns}).to(torch::kFloat).div_(255);
}

/// The 60000 training images split into train (first 55000) and validation (last 5000), plus the 10000
/// test images, normalised with Fashion-MNIST's mean and standard deviation.
inline FashionMnistSplits load_fashion_mnist(const std::string& requested_folder) {
  const auto folder = fashion_mnist_folder(requested_folder);
  auto normalise = [](const torch::Tensor& images) { return (images - 0.2860) / 0.3530; };
  auto train_images = normalise(read_idx(folder, idx_files[0], 60000));
  auto train_labels = read_idx(folder, idx_files[1], 60000);
  auto test_images = read_idx(folder, idx_files[2], 10000);
  auto test_labels = read_idx(folder, idx_files[3], 10000);
  constexpr std::int64_t val_size = 5000;
  const auto n = train_images.size(0) - val_size;
  return {InMemoryImages(train_images.slice(0, 0, n), train_labels.slice(0, 0, n)),
          InMemoryImages(train_images.slice(0, n), train_labels.slice(0, n)),
          InMemoryImages(normalise(test_images), test_labels)};
}

inline std::int64_t batches_per_epoch(const InMemoryImages& data, std::int64_t batch_size) {
  const auto n = static_cast<std::int64_t>(*data.size());
  return (n + batch_size - 1) / batch_size;
}

/// A torch::data loader that owns its loader and tells its number of batches (volt::sized views a loader it does
/// not own): what the data module's loader functions return.
template <class Sampler>
class SizedLoader {
 public:
  SizedLoader(const InMemoryImages& data, std::int64_t batch_size) : batches_(batches_per_epoch(data, batch_size)) {
    // LibTorch's RandomSampler draws a permutation from the default generator when it is built, and again when
    // each epoch starts; PyTorch's draws only when an epoch starts. The generator is put back after the build,
    // so a run's shuffles depend on the seed and the epoch only, wherever the loader is made (here in the data
    // module's train_dataloader, after the Trainer seeded).
    auto generator = at::detail::getDefaultCPUGenerator();
    torch::Tensor state;
    {
      std::lock_guard<std::mutex> lock(generator.mutex());
      state = generator.get_state();
    }
    loader_ = torch::data::make_data_loader<Sampler>(data,
                                                     torch::data::DataLoaderOptions(static_cast<std::size_t>(batch_size)));
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(state);
  }
  auto begin() { return loader_->begin(); }
  auto end() { return loader_->end(); }
  std::int64_t size() const { return batches_; }

 private:
  std::int64_t batches_;
  std::unique_ptr<torch::data::StatelessDataLoader<InMemoryImages, Sampler>> loader_;
};

/// Fashion-MNIST as a volt::DataModule (Lightning's LightningDataModule): prepare_data finds (or unpacks) the
/// files once per node, setup reads them on every process, and the loader functions serve the splits (the
/// training split shuffled).
class FashionMnistData {
 public:
  FashionMnistData(std::string requested_folder, std::int64_t batch_size)
      : requested_(std::move(requested_folder)), batch_size_(batch_size) {}

  void prepare_data() { fashion_mnist_folder(requested_); }
  void setup(volt::Stage /*stage*/) {
    if (!splits_) splits_.emplace(load_fashion_mnist(requested_));
  }
  SizedLoader<torch::data::samplers::RandomSampler> train_dataloader() { return {splits().train, batch_size_}; }
  SizedLoader<torch::data::samplers::SequentialSampler> val_dataloader() { return {splits().val, batch_size_}; }
  SizedLoader<torch::data::samplers::SequentialSampler> test_dataloader() { return {splits().test, batch_size_}; }
  std::map<std::string, std::string> hparams() const { return {{"batch_size", std::to_string(batch_size_)}}; }

 private:
  const FashionMnistSplits& splits() {
    if (!splits_) setup(volt::Stage::none);
    return *splits_;
  }
  std::string requested_;
  std::int64_t batch_size_;
  std::optional<FashionMnistSplits> splits_;
};

}  // namespace examples

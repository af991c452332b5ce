// Fashion-MNIST for the examples: Debian's dataset-fashion-mnist package (gzipped IDX files in
// /usr/share/datasets/fashion-mnist) unpacked once into a cache folder, held in memory, and served in
// batches by torch::data loaders.
#pragma once

#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <stdexcept>
#include <string>
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

/// The 60000 training images split into train (first 55000) and validation (last 5000), plus the 10000
/// test images, normalised with Fashion-MNIST's mean and standard deviation.
inline FashionMnistSplits load_fashion_mnist(const std::string& requested_folder) {
  const auto folder = fashion_mnist_folder(requested_folder).string();
  using Mode = torch::data::datasets::MNIST::Mode;
  torch::data::datasets::MNIST train(folder, Mode::kTrain);
  torch::data::datasets::MNIST test(folder, Mode::kTest);
  auto normalise = [](const torch::Tensor& images) { return (images - 0.2860) / 0.3530; };
  auto train_images = normalise(train.images());
  auto train_labels = train.targets();
  constexpr std::int64_t val_size = 5000;
  const auto n = train_images.size(0) - val_size;
  return {InMemoryImages(train_images.slice(0, 0, n), train_labels.slice(0, 0, n)),
          InMemoryImages(train_images.slice(0, n), train_labels.slice(0, n)),
          InMemoryImages(normalise(test.images()), test.targets())};
}

inline std::int64_t batches_per_epoch(const InMemoryImages& data, std::int64_t batch_size) {
  const auto n = static_cast<std::int64_t>(*data.size());
  return (n + batch_size - 1) / batch_size;
}

}  // namespace examples

// memory_format (TrainerOptions and FabricOptions): which tensors go channels-last, when automatic picks it, that
// the step sees channels-last weights and batches, that checkpoints hold contiguous weights, and that a resumed
// channels-last run is bit-identical to an uninterrupted one.
#include "test_common.hpp"

#include "trainer/trainer_fixtures.hpp"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <tuple>
#include <vector>

namespace {

using volt_test::TempDir;

bool is_channels_last(const torch::Tensor& tensor) {
  return tensor.is_contiguous(torch::MemoryFormat::ChannelsLast) && !tensor.is_contiguous();
}

/// Images of 3x6x6 with 4 classes; each batch of 8.
std::vector<torch::data::Example<>> image_batches(int count) {
  torch::manual_seed(11);
  std::vector<torch::data::Example<>> batches;
  for (int i = 0; i < count; ++i) batches.push_back({torch::randn({8, 3, 6, 6}), torch::randint(4, {8})});
  return batches;
}

/// A small CNN (convolution, batch norm, dropout) that records the layout of what its step sees.
struct SmallCnn : torch::nn::Module {
  torch::nn::Conv2d conv{torch::nn::Conv2dOptions(3, 5, 3).padding(1)};
  torch::nn::BatchNorm2d norm{5};
  torch::nn::Linear head{5, 4};
  torch::nn::Dropout dropout;
  std::vector<bool> batch_channels_last, weight_channels_last;
  explicit SmallCnn(double dropout_probability = 0.2) : dropout(dropout_probability) {
    register_module("conv", conv);
    register_module("norm", norm);
    register_module("head", head);
    register_module("dropout", dropout);
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto features = torch::relu(norm->forward(conv->forward(x))).mean({2, 3});
    return head->forward(dropout->forward(features));
  }
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t) {
    batch_channels_last.push_back(is_channels_last(batch.data));
    weight_channels_last.push_back(is_channels_last(conv->weight));
    return torch::nn::functional::cross_entropy(forward(batch.data), batch.target);
  }
  std::shared_ptr<torch::optim::Adam> configure_optimizers() {
    return std::make_shared<torch::optim::Adam>(parameters(), torch::optim::AdamOptions(1e-2));
  }
};

/// SmallCnn with SGD: an update proportional to the gradient, so that runs whose kernels round differently
/// stay close (Adam's normalised step turns a rounding difference in a near-zero gradient into a full step).
struct SgdCnn : SmallCnn {
  using SmallCnn::SmallCnn;
  std::shared_ptr<torch::optim::SGD> configure_optimizers() {
    return std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(0.05));
  }
};

}  // namespace

TEST_CASE("memory format: only defined 4-D floating tensors go channels-last, in any collection") {
  using Batch = std::tuple<torch::Tensor, torch::Tensor, std::vector<torch::Tensor>, torch::Tensor>;
  Batch batch{torch::randn({2, 3, 4, 5}), torch::randn({2, 3}), {torch::randint(9, {2, 3, 4, 5}), torch::randn({1, 2, 3, 3})},
              torch::Tensor()};
  const Batch out = volt::detail::batch_to_channels_last(batch);
  CHECK(is_channels_last(std::get<0>(out)));
  CHECK(torch::equal(std::get<0>(out), std::get<0>(batch)));  // the values stay, the strides change
  CHECK(std::get<1>(out).is_contiguous());
  CHECK(std::get<2>(out)[0].is_contiguous());  // integer images are left alone
  CHECK(is_channels_last(std::get<2>(out)[1]));
  CHECK_FALSE(std::get<3>(out).defined());
  // Already channels-last: the same tensor, no copy.
  const auto already = std::get<0>(out);
  CHECK(volt::detail::to_channels_last(already).data_ptr() == already.data_ptr());
}

TEST_CASE("memory format: automatic picks channels-last for a model with a 2-D convolution on CUDA only") {
  auto cnn = std::make_shared<SmallCnn>();
  auto mlp = std::make_shared<volt_test::Classifier>();
  const torch::Device cpu(torch::kCPU), cuda(torch::kCUDA, 0);
  CHECK(volt::detail::has_conv2d(*cnn));
  CHECK_FALSE(volt::detail::has_conv2d(*mlp));
  torch::nn::Conv2d bare(torch::nn::Conv2dOptions(1, 1, 1));
  CHECK(volt::detail::has_conv2d(*bare));  // the module itself
  CHECK(volt::detail::uses_channels_last(volt::MemoryFormat::automatic, cuda, *cnn));
  CHECK_FALSE(volt::detail::uses_channels_last(volt::MemoryFormat::automatic, cpu, *cnn));
  CHECK_FALSE(volt::detail::uses_channels_last(volt::MemoryFormat::automatic, cuda, *mlp));
  CHECK(volt::detail::uses_channels_last(volt::MemoryFormat::channels_last, cpu, *mlp));
  CHECK_FALSE(volt::detail::uses_channels_last(volt::MemoryFormat::contiguous, cuda, *cnn));
  CHECK(volt::to_string(volt::MemoryFormat::channels_last) == "channels_last");
}

TEST_CASE("memory format: channels_last reaches the step (weights and batches); contiguous changes nothing") {
  TempDir dir;
  const auto data = image_batches(3);
  for (const auto format : {volt::MemoryFormat::channels_last, volt::MemoryFormat::contiguous,
                            volt::MemoryFormat::automatic}) {
    CAPTURE(volt::to_string(format));
    auto model = std::make_shared<SmallCnn>();
    auto options = volt_test::quiet_options(dir);
    options.memory_format = format;
    volt::Trainer<volt::CPU> trainer(options);
    trainer.fit(model, data);
    const bool expected = format == volt::MemoryFormat::channels_last;  // automatic: not on the CPU
    REQUIRE(model->batch_channels_last.size() == 3);
    for (std::size_t i = 0; i < 3; ++i) {
      CHECK(model->batch_channels_last[i] == expected);
      CHECK(model->weight_channels_last[i] == expected);
    }
    CHECK(is_channels_last(model->conv->weight) == expected);
    CHECK(model->conv->bias.is_contiguous());  // 1-D tensors are untouched
  }
}

TEST_CASE("memory format: a channels-last run's checkpoint holds contiguous weights equal to the model's") {
  TempDir dir;
  auto model = std::make_shared<SmallCnn>();
  auto options = volt_test::quiet_options(dir);
  options.memory_format = volt::MemoryFormat::channels_last;
  options.enable_checkpointing = true;
  volt::Trainer<volt::CPU> trainer(options, volt::ModelCheckpoint{{.dirpath = dir.path / "ckpt"}});
  trainer.fit(model, image_batches(2));
  const auto path = dir.path / "ckpt" / "epoch=0-step=2.ckpt";
  REQUIRE(std::filesystem::exists(path));

  torch::serialize::InputArchive archive;
  volt::detail::load_archive(archive, path, torch::kCPU);
  torch::serialize::InputArchive weights;
  REQUIRE(archive.try_read("model", weights));
  torch::serialize::InputArchive conv;
  REQUIRE(weights.try_read("conv", conv));
  torch::Tensor saved;
  REQUIRE(conv.try_read("weight", saved));
  CHECK(saved.is_contiguous());
  CHECK(torch::equal(saved, model->conv->weight));
  CHECK(is_channels_last(model->conv->weight));

  auto fresh = std::make_shared<SmallCnn>();
  volt::load_checkpoint_weights(*fresh, path);
  CHECK(torch::equal(fresh->conv->weight, model->conv->weight));
  CHECK(torch::equal(fresh->norm->running_mean, model->norm->running_mean));
}

TEST_CASE("memory format: resuming a channels-last run is bit-identical to the uninterrupted run") {
  TempDir dir;
  const auto data = image_batches(4);
  auto run = [&](std::int64_t epochs, const std::filesystem::path& resume_from, const std::filesystem::path& save_dir) {
    torch::manual_seed(3);
    auto model = std::make_shared<SmallCnn>();
    auto options = volt_test::quiet_options(dir);
    options.max_epochs = epochs;
    options.memory_format = volt::MemoryFormat::channels_last;
    options.enable_checkpointing = true;
    volt::Trainer<volt::CPU> trainer(options, volt::ModelCheckpoint{{.dirpath = save_dir, .save_top_k = -1}});
    // A resumed run must take its weights from the checkpoint: seed it differently (dropout included).
    if (!resume_from.empty()) torch::manual_seed(99);
    trainer.fit(model, data, resume_from);
    return model;
  };
  auto straight = run(4, {}, dir.path / "a");
  REQUIRE(std::filesystem::exists(dir.path / "a" / "epoch=1-step=8.ckpt"));
  auto resumed = run(4, dir.path / "a" / "epoch=1-step=8.ckpt", dir.path / "b");
  REQUIRE(resumed->weight_channels_last.size() == 8);  // epochs 3 and 4
  for (bool channels_last : resumed->weight_channels_last) CHECK(channels_last);
  const auto a = straight->named_parameters(), b = resumed->named_parameters();
  for (const auto& item : a) CHECK_MESSAGE(torch::equal(item.value(), b[item.key()]), item.key());
  const auto buffers_a = straight->named_buffers(), buffers_b = resumed->named_buffers();
  for (const auto& item : buffers_a) CHECK_MESSAGE(torch::equal(item.value(), buffers_b[item.key()]), item.key());
}

TEST_CASE("memory format: Fabric converts set-up models and the batches it moves") {
  volt::Fabric<volt::CPU> fabric({.devices = 1, .memory_format = volt::MemoryFormat::channels_last});
  auto data = image_batches(2);
  auto loader = fabric.setup_dataloaders(data);  // made before the model: it follows the Fabric
  auto model = fabric.setup_module(std::make_shared<SmallCnn>());
  CHECK(is_channels_last(model->conv->weight));
  CHECK(is_channels_last(fabric.to_device(torch::randn({2, 3, 4, 4}))));
  for (const auto& batch : loader) CHECK(is_channels_last(batch.data));

  volt::Fabric<volt::CPU> plain({.devices = 1});
  auto other = plain.setup_module(std::make_shared<SmallCnn>());
  CHECK(other->conv->weight.is_contiguous());
  CHECK(plain.to_device(torch::randn({2, 3, 4, 4})).is_contiguous());
}

TEST_CASE("memory format on CUDA: channels-last with a captured step trains as the eager channels-last run") {
  if (!torch::cuda::is_available()) {
    MESSAGE("skipped: no CUDA device (torch::cuda::is_available() is false)");
    return;
  }
  TempDir dir;
  const auto data = image_batches(6);
  auto run = [&](volt::MemoryFormat format, bool graphs) {
    torch::manual_seed(5);
    auto model = std::make_shared<SgdCnn>(/*dropout_probability=*/0.0);
    auto options = volt_test::quiet_options(dir);
    options.max_epochs = 2;
    options.memory_format = format;
    options.cuda_graphs = graphs;
    options.deterministic = true;  // the same cuDNN algorithms in the eager and the captured run
    volt::Trainer<volt::CUDA> trainer(options);
    trainer.fit(model, data);
    CHECK(is_channels_last(model->conv->weight) == (format != volt::MemoryFormat::contiguous));
    if (graphs) CHECK(trainer.cuda_graph_replays() > 0);
    return std::make_pair(model, trainer.cuda_graph_replays());
  };
  auto [eager, eager_replays] = run(volt::MemoryFormat::automatic, false);  // automatic: a CNN on CUDA
  auto [graphed, replays] = run(volt::MemoryFormat::channels_last, true);
  auto [contiguous, unused] = run(volt::MemoryFormat::contiguous, false);
  MESSAGE("CUDA graph replays with channels-last inputs: " << replays);
  CHECK(eager_replays == 0);
  for (bool seen : eager->batch_channels_last) CHECK(seen);
  const auto a = eager->named_parameters(), b = graphed->named_parameters(), c = contiguous->named_parameters();
  double graph_difference = 0, layout_difference = 0;
  for (const auto& item : a) {
    graph_difference = std::max(graph_difference, (item.value() - b[item.key()]).abs().max().item<double>());
    layout_difference = std::max(layout_difference, (item.value() - c[item.key()]).abs().max().item<double>());
    CHECK_MESSAGE(torch::allclose(item.value(), b[item.key()], 1e-4, 1e-5), item.key());
    // Other cuDNN algorithms for the other layout: the same training within float rounding.
    CHECK_MESSAGE(torch::allclose(item.value(), c[item.key()], 1e-3, 1e-4), item.key());
  }
  MESSAGE("largest weight difference, captured vs eager channels-last: " << graph_difference
                                                                         << "; channels-last vs contiguous: "
                                                                         << layout_difference);
}

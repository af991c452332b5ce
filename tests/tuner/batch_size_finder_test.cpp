#include "test_common.hpp"

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

c10::SourceLocation here() { return c10::SourceLocation{"volt_test", __FILE__, static_cast<std::uint32_t>(__LINE__)}; }

/// The error the CUDA caching allocator throws, built without a GPU.
c10::OutOfMemoryError out_of_memory(std::int64_t batch_size) {
  return c10::OutOfMemoryError(here(), "CUDA out of memory. Tried to allocate " + std::to_string(batch_size) + " MiB");
}

/// A trial that "runs out of memory" above `limit`, recording the sizes it was asked for.
struct LimitedDevice {
  std::int64_t limit;
  std::vector<std::int64_t> asked{};
  void operator()(std::int64_t batch_size) {
    asked.push_back(batch_size);
    if (batch_size > limit) throw out_of_memory(batch_size);
  }
};

std::vector<std::int64_t> sizes(const volt::BatchSizeFinderResult& result) {
  std::vector<std::int64_t> out;
  for (const auto& trial : result.trials) out.push_back(trial.batch_size);
  return out;
}

}  // namespace

TEST_CASE("tuner: is_oom_error recognises Lightning's out-of-memory errors") {
  CHECK(volt::is_oom_error(out_of_memory(1)));
  CHECK(volt::is_oom_error(std::bad_alloc()));
  CHECK(volt::is_oom_error(c10::Error(here(), "CUDA error: out of memory")));
  CHECK(volt::is_oom_error(std::runtime_error("MPS backend out of memory (MPS allocated: 1 GB)")));
  CHECK(volt::is_oom_error(std::runtime_error("[enforce fail at alloc_cpu.cpp:75] DefaultCPUAllocator: can't "
                                              "allocate memory: you tried to allocate 1099511627776 bytes")));
  CHECK(volt::is_oom_error(std::runtime_error("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling cublasCreate")));
  CHECK_FALSE(volt::is_oom_error(c10::Error(here(), "mat1 and mat2 shapes cannot be multiplied")));
  CHECK_FALSE(volt::is_oom_error(std::runtime_error("out of memory")));  // Lightning needs "CUDA" too
}

TEST_CASE("tuner: power mode doubles until out of memory and returns the last size that fit") {
  volt_test::CaptureLog log;
  LimitedDevice device{100};
  const auto result = volt::find_batch_size(std::ref(device));
  CHECK(result.batch_size == 64);
  CHECK(result.hit_out_of_memory);
  CHECK(device.asked == std::vector<std::int64_t>{2, 4, 8, 16, 32, 64, 128});
  CHECK(sizes(result) == device.asked);
  CHECK(result.trials.back().fits == false);
  CHECK(log.informed("Batch size 2 succeeded, trying batch size 4"));
  CHECK(log.informed("Finished batch size finder, will continue with full run using batch size 64"));
}

TEST_CASE("tuner: a first size too large is halved until one fits, then the search stops at the next failure") {
  LimitedDevice device{100};
  const auto result = volt::find_batch_size(std::ref(device), {.init_val = 512});
  CHECK(device.asked == std::vector<std::int64_t>{512, 256, 128, 64, 128});
  CHECK(result.batch_size == 64);
}

TEST_CASE("tuner: max_trials and max_val bound the search") {
  LimitedDevice unlimited{1 << 30};
  auto result = volt::find_batch_size(std::ref(unlimited), {.init_val = 4, .max_trials = 3});
  CHECK(result.batch_size == 16);
  CHECK_FALSE(result.hit_out_of_memory);
  LimitedDevice dataset{1 << 30};
  result = volt::find_batch_size(std::ref(dataset), {.max_val = 50});
  CHECK(dataset.asked == std::vector<std::int64_t>{2, 4, 8, 16, 32, 50});
  CHECK(result.batch_size == 50);
}

TEST_CASE("tuner: other errors propagate; no size fits; invalid options") {
  auto broken = [](std::int64_t) { throw std::logic_error("shape mismatch"); };
  CHECK_THROWS_WITH_AS(volt::find_batch_size(broken), "shape mismatch", std::logic_error);
  LimitedDevice tiny{0};
  VOLT_CHECK_THROWS_CONTAINS(volt::find_batch_size(std::ref(tiny)), std::runtime_error,
                             "ran out of memory even at batch size 1");
  CHECK(tiny.asked == std::vector<std::int64_t>{2, 1});
  LimitedDevice device{8};
  VOLT_CHECK_THROWS_CONTAINS(volt::find_batch_size(std::ref(device), {.mode = "binsearch"}),
                             volt::MisconfigurationError, "mode `binsearch` is not supported");
  VOLT_CHECK_THROWS_CONTAINS(volt::find_batch_size(std::ref(device), {.init_val = 0}), volt::MisconfigurationError,
                             "init_val=0");
}

namespace {

/// A model whose device "has room" for batches of at most `limit` samples.
struct MemoryBoundNet : torch::nn::Module {
  explicit MemoryBoundNet(std::int64_t limit) : limit(limit) { register_module("linear", linear); }
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t, volt::StepContext&) {
    if (batch.data.size(0) > limit) throw out_of_memory(batch.data.size(0));
    ++steps;
    return torch::nn::functional::mse_loss(linear->forward(batch.data), batch.target);
  }
  volt::OptimizerConfig configure_optimizers() {
    return {std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(0.1))};
  }
  torch::nn::Linear linear{4, 1};
  std::int64_t limit;
  std::int64_t steps = 0;
};

}  // namespace

TEST_CASE("tuner: scale_batch_size runs short fits with a Trainer on fresh models") {
  std::vector<std::shared_ptr<MemoryBoundNet>> models;
  auto make_model = [&] {
    models.push_back(std::make_shared<MemoryBoundNet>(40));
    return models.back();
  };
  // Any range of batches is training data: 300 samples cut into batches of `batch_size`.
  auto make_batches = [](std::int64_t batch_size) {
    const auto inputs = torch::randn({300, 4});
    const auto targets = torch::randn({300, 1});
    std::vector<torch::data::Example<>> batches;
    for (std::int64_t start = 0; start < 300; start += batch_size) {
      batches.push_back({inputs.slice(0, start, start + batch_size), targets.slice(0, start, start + batch_size)});
    }
    return batches;
  };
  const auto result = volt::scale_batch_size<volt::CPU, volt::SingleDevice, volt::FP32>(
      {.devices = 1, .max_epochs = 100, .default_root_dir = "unused"}, make_model, make_batches,
      {.steps_per_trial = 2, .init_val = 5});
  CHECK(result.batch_size == 40);
  CHECK(sizes(result) == std::vector<std::int64_t>{5, 10, 20, 40, 80});
  REQUIRE(models.size() == 5);
  for (std::size_t i = 0; i + 1 < models.size(); ++i) CHECK(models[i]->steps == 2);  // steps_per_trial each
  CHECK(models.back()->steps == 0);
}

TEST_CASE("tuner: scale_batch_size refuses DDP with Lightning's message, before any process starts") {
  int models = 0;
  auto make_model = [&] {
    ++models;
    return std::make_shared<MemoryBoundNet>(40);
  };
  auto make_batches = [](std::int64_t batch_size) {
    return std::vector<torch::data::Example<>>{{torch::randn({batch_size, 4}), torch::randn({batch_size, 1})}};
  };
  VOLT_CHECK_THROWS_CONTAINS(
      (volt::scale_batch_size<volt::CPU, volt::DDP, volt::FP32>({.devices = 2}, make_model, make_batches)),
      std::invalid_argument, "Tuning the batch size is currently not supported with distributed strategies.");
  CHECK(models == 0);
}

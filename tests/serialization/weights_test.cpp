#include "test_common.hpp"

#include "trainer/trainer_fixtures.hpp"

#include <fstream>

// save_weights / load_weights within C++; the exchange with Python is tests/python/check_weights.py.
namespace {

struct WeightsNet : torch::nn::Module {
  torch::nn::Sequential net{torch::nn::Linear(4, 3), torch::nn::BatchNorm1d(3), torch::nn::ReLU(), torch::nn::Linear(3, 2)};
  WeightsNet() { register_module("net", net); }
};

struct Wider : torch::nn::Module {
  torch::nn::Sequential net{torch::nn::Linear(4, 5), torch::nn::BatchNorm1d(5), torch::nn::ReLU(), torch::nn::Linear(5, 2)};
  torch::nn::Linear extra{torch::nn::Linear(1, 1)};
  Wider() {
    register_module("net", net);
    register_module("extra", extra);
  }
};

}  // namespace

TEST_CASE("state_dict uses Python's dotted names and order: each module's parameters, then its buffers") {
  auto model = std::make_shared<WeightsNet>();
  std::vector<std::string> keys;
  for (const auto& item : volt::state_dict(model)) keys.push_back(item.key());
  CHECK(keys == std::vector<std::string>{"net.0.weight", "net.0.bias", "net.1.weight", "net.1.bias",
                                         "net.1.running_mean", "net.1.running_var", "net.1.num_batches_tracked",
                                         "net.3.weight", "net.3.bias"});
  // A ModuleHolder works too.
  torch::nn::Linear linear(2, 1);
  CHECK(volt::state_dict(linear).size() == 2);
}

TEST_CASE("save_weights then load_weights gives back every tensor, dtype and shape") {
  volt_test::TempDir dir;
  volt::StateDict weights;
  weights.insert("a.weight", torch::randn({3, 4}));
  weights.insert("a.bias", torch::arange(3, torch::kDouble));
  weights.insert("steps", torch::tensor(7, torch::kLong));
  weights.insert("half", torch::randn({5}).to(torch::kHalf));
  weights.insert("bf16", torch::randn({2, 2}).to(torch::kBFloat16));
  weights.insert("mask", torch::tensor({true, false, true}));
  weights.insert("transposed", torch::randn({2, 3}).t());
  weights.insert("big", torch::tensor({int64_t{1} << 40, -(int64_t{1} << 35), int64_t{-1}}, torch::kLong));
  weights.insert("empty", torch::empty({0, 3}));
  const auto path = dir.path / "sub" / "weights.pt";
  volt::save_weights(weights, path);
  const auto loaded = volt::load_weights(path);
  REQUIRE(loaded.size() == weights.size());
  for (std::size_t i = 0; i < weights.size(); ++i) {
    CAPTURE(weights.keys()[i]);
    CHECK(loaded.keys()[i] == weights.keys()[i]);
    CHECK((loaded.values()[i].scalar_type() == weights.values()[i].scalar_type()));
    CHECK(loaded.values()[i].sizes() == weights.values()[i].sizes());
    CHECK(torch::equal(loaded.values()[i], weights.values()[i]));
    CHECK(loaded.values()[i].device().is_cpu());
  }
  // No temporary file is left next to it.
  int files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path / "sub")) ++files;
  CHECK(files == 1);
}

TEST_CASE("load_weights into a module copies values; strict errors name missing, unexpected and mis-shaped keys") {
  volt_test::TempDir dir;
  torch::manual_seed(3);
  auto source = std::make_shared<WeightsNet>();
  source->net[1]->as<torch::nn::BatchNorm1d>()->running_mean.fill_(0.5);
  volt::save_weights(source, dir.path / "net.pt");
  auto target = std::make_shared<WeightsNet>();
  CHECK_FALSE(torch::equal(volt::state_dict(target)["net.0.weight"], volt::state_dict(source)["net.0.weight"]));
  const auto result = volt::load_weights(target, dir.path / "net.pt");
  CHECK(result.missing_keys.empty());
  CHECK(result.unexpected_keys.empty());
  for (const auto& item : volt::state_dict(source)) {
    CAPTURE(item.key());
    CHECK(torch::equal(volt::state_dict(target)[item.key()], item.value()));
  }

  auto wider = std::make_shared<Wider>();
  const auto before = volt::state_dict(wider)["net.0.weight"].clone();
  try {
    volt::load_weights(wider, dir.path / "net.pt");
    FAIL("expected an error");
  } catch (const std::runtime_error& error) {
    const std::string message = error.what();
    CHECK(message.find("Missing key(s) in state_dict: \"extra.weight\", \"extra.bias\".") != std::string::npos);
    CHECK(message.find("size mismatch for net.0.weight: copying a param with shape torch.Size([3, 4]) from "
                       "checkpoint, the shape in current model is torch.Size([5, 4]).") != std::string::npos);
    CHECK(message.find("net.pt") != std::string::npos);
  }
  CHECK(torch::equal(volt::state_dict(wider)["net.0.weight"], before));  // untouched after an error

  // strict = false reports instead of throwing (shapes must still match).
  auto partial = std::make_shared<WeightsNet>();
  volt::StateDict some;
  some.insert("net.0.weight", torch::ones({3, 4}));
  some.insert("unknown", torch::ones({1}));
  const auto relaxed = volt::load_state_dict(partial, some, {.strict = false});
  CHECK(relaxed.unexpected_keys == std::vector<std::string>{"unknown"});
  CHECK(relaxed.missing_keys.size() == 8);
  CHECK(torch::equal(volt::state_dict(partial)["net.0.weight"], torch::ones({3, 4})));
  VOLT_CHECK_THROWS_CONTAINS(volt::load_state_dict(partial, some), std::runtime_error, "Unexpected key(s) in state_dict: \"unknown\".");
}

TEST_CASE("load_weights errors name the file") {
  volt_test::TempDir dir;
  VOLT_CHECK_THROWS_CONTAINS(volt::load_weights(dir.path / "missing.pt"), std::runtime_error, "missing.pt does not exist");
  {
    std::ofstream junk(dir.path / "junk.pt");
    junk << "not a zip archive";
  }
  VOLT_CHECK_THROWS_CONTAINS(volt::load_weights(dir.path / "junk.pt"), std::runtime_error,
                             ("could not read the weights file " + (dir.path / "junk.pt").string()).c_str());
  // A LibTorch archive of another kind (torch::save of a module) is refused with the file named.
  auto model = std::make_shared<WeightsNet>();
  torch::save(model, (dir.path / "archive.pt").string());
  VOLT_CHECK_THROWS_CONTAINS(volt::load_weights(dir.path / "archive.pt"), std::runtime_error, "archive.pt");
  VOLT_CHECK_THROWS_CONTAINS(volt::save_weights(model, dir.path / "junk.pt" / "x.pt"), std::runtime_error, "x.pt");
}

TEST_CASE("load_weights maps tensors to the requested device") {
  volt_test::TempDir dir;
  volt::StateDict weights;
  weights.insert("w", torch::ones({2}));
  volt::save_weights(weights, dir.path / "w.pt");
  CHECK(volt::load_weights(dir.path / "w.pt", torch::kCPU)["w"].device().is_cpu());
  if (!torch::cuda::is_available()) {
    MESSAGE("skipped the CUDA half: no CUDA device");
    return;
  }
  const auto on_gpu = volt::load_weights(dir.path / "w.pt", torch::Device(torch::kCUDA, 0));
  CHECK(on_gpu["w"].device().is_cuda());
}

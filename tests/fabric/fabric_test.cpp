#include "test_common.hpp"

#include "trainer/trainer_fixtures.hpp"

#include <cmath>
#include <limits>

// volt::Fabric against Lightning Fabric's semantics, on the CPU (CUDA cases skip without a GPU).
namespace {

struct Mlp : torch::nn::Module {
  torch::nn::Linear fc1{torch::nn::Linear(1, 16)};
  torch::nn::Linear fc2{torch::nn::Linear(16, 1)};
  Mlp() {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc2->forward(torch::tanh(fc1->forward(x))); }
};

bool cuda_missing() {
  if (torch::cuda::is_available()) return false;
  MESSAGE("skipped: no CUDA device (torch::cuda::is_available() is false)");
  return true;
}

/// FP32 with a real GradScaler on the CPU: exercises Fabric's loss-scaling paths (unscale before clipping,
/// skipped steps on inf, scale updates) where LibTorch has no fp16 autocast on the CPU. Uses the scaler's
/// tensor-op path, which every LibTorch version runs on the CPU.
struct ScaledFP32 : volt::FP32 {
  volt::GradScaler grad_scaler{volt::GradScalerOptions{.init_scale = 1024.0, .growth_interval = 2, .use_fused_kernels = false},
                               torch::Device(torch::kCPU)};
  torch::Tensor pre_backward(const torch::Tensor& loss) { return grad_scaler.scale(loss); }
  volt::GradScaler* scaler() noexcept { return &grad_scaler; }
  const volt::GradScaler* scaler() const noexcept { return &grad_scaler; }
};

std::vector<torch::data::Example<>> regression_batches(int count) {
  torch::manual_seed(5);
  std::vector<torch::data::Example<>> batches;
  for (int i = 0; i < count; ++i) {
    auto x = torch::rand({32, 1}) * 2 - 1;
    batches.emplace_back(x, torch::sin(3 * x));
  }
  return batches;
}

}  // namespace

TEST_CASE("Fabric construction: devices through the Trainer's connector, Fabric's error types, no device lines") {
  volt_test::CaptureLog log;
  volt::Fabric<volt::CPU> fabric({.devices = 1});
  CHECK((fabric.device() == torch::Device(torch::kCPU)));
  CHECK(fabric.device_ids() == std::vector<int>{0});
  CHECK(log.infos.empty());  // Lightning Fabric prints no "GPU available" line

  VOLT_CHECK_THROWS_CONTAINS(volt::Fabric<volt::CPU>({.devices = 0}), std::invalid_argument,
                             "`volt::Fabric({.devices = 0})` value is not a valid input using cpu accelerator");
  VOLT_CHECK_THROWS_CONTAINS(volt::Fabric<volt::CPU>({.devices = 2}), std::invalid_argument,
                             "volt::SingleDevice runs on exactly one device of one node");
  VOLT_CHECK_THROWS_CONTAINS(volt::Fabric<volt::CPU>({.devices = 1, .num_nodes = 0}), std::invalid_argument,
                             "`num_nodes` must be a positive integer, but got 0.");
  VOLT_CHECK_THROWS_CONTAINS(volt::Fabric<volt::CPU>({.devices = 1, .num_nodes = 2}), std::invalid_argument,
                             "num_nodes=2");
  VOLT_CHECK_THROWS_CONTAINS(volt::Fabric<volt::CPU>({.devices = -2}), std::invalid_argument,
                             "`devices` selected with `CPUAccelerator` should be an int > 0.");
  {
    volt::testing::ScopedMachine machine{{.cuda_device_count = 0}};
    VOLT_CHECK_THROWS_CONTAINS(volt::Fabric<volt::CUDA>({.devices = 1}), std::runtime_error,
                               "`CUDAAccelerator` can not run on your system since the accelerator is not available");
    VOLT_CHECK_THROWS_CONTAINS(volt::Fabric<volt::GPU>({.devices = 1}), std::runtime_error,
                               "No supported gpu backend found!");
    try {
      volt::Fabric<volt::CUDA> unavailable({.devices = 1});
    } catch (const volt::MisconfigurationError&) {
      FAIL("Fabric must not throw the Trainer's MisconfigurationError");
    } catch (const std::runtime_error&) {
    }
  }
}

TEST_CASE("Fabric seed: seeds LibTorch's generator and logs Lightning's line") {
  volt_test::CaptureLog log;
  volt::Fabric<volt::CPU> fabric({.devices = 1, .seed = 42});
  const auto first = torch::randn({4});
  torch::manual_seed(42);
  CHECK(torch::equal(first, torch::randn({4})));
  CHECK(log.informed("Seed set to 42"));
}

TEST_CASE("Fabric::setup returns the same objects, converts the module and refuses a second setup") {
  volt::Fabric<volt::CPU> fabric({.devices = 1});
  auto model = std::make_shared<Mlp>();
  auto optimizer = std::make_shared<torch::optim::Adam>(model->parameters(), torch::optim::AdamOptions(1e-2));
  auto [set_model, set_optimizer] = fabric.setup(model, optimizer);
  CHECK(set_model.get() == model.get());
  CHECK(set_optimizer.get() == optimizer.get());
  VOLT_CHECK_THROWS_CONTAINS(fabric.setup(model, std::make_shared<torch::optim::SGD>(model->parameters(), 0.1)),
                             std::invalid_argument, "A model should be passed only once to the `setup` method.");
  auto other = std::make_shared<Mlp>();
  VOLT_CHECK_THROWS_CONTAINS(fabric.setup(other, optimizer), std::invalid_argument,
                             "An optimizer should be passed only once to the `setup` method.");
  // A ModuleHolder and setup_module work too.
  torch::nn::Linear linear(3, 2);
  auto same = fabric.setup_module(linear);
  CHECK(same.ptr().get() == linear.ptr().get());

  volt::Fabric<volt::CPU, volt::SingleDevice, volt::FP64> fabric64({.devices = 1});
  auto double_model = fabric64.setup_module(std::make_shared<Mlp>());
  CHECK((double_model->fc1->weight.scalar_type() == torch::kDouble));
  auto batch = fabric64.convert_input(torch::data::Example<>(torch::ones({2, 1}), torch::ones({2}, torch::kLong)));
  CHECK((batch.data.scalar_type() == torch::kDouble));
  CHECK((batch.target.scalar_type() == torch::kLong));
  {
    auto guard = fabric64.autocast();
    CHECK((torch::ones({1}).scalar_type() == torch::kDouble));
  }
  CHECK((torch::ones({1}).scalar_type() == torch::kFloat));
}

TEST_CASE("Fabric moves an optimizer's existing state with setup (values kept)") {
  auto model = std::make_shared<Mlp>();
  auto optimizer = std::make_shared<torch::optim::Adam>(model->parameters(), torch::optim::AdamOptions(1e-2));
  auto loss = model->forward(torch::ones({4, 1})).sum();
  loss.backward();
  optimizer->step();
  REQUIRE_FALSE(optimizer->state().empty());
  const auto& state = static_cast<torch::optim::AdamParamState&>(*optimizer->state().begin()->second);
  const auto before = state.exp_avg().clone();
  volt::Fabric<volt::CPU> fabric({.devices = 1});
  fabric.setup(model, optimizer);
  const auto& after = static_cast<torch::optim::AdamParamState&>(*optimizer->state().begin()->second);
  CHECK(torch::equal(after.exp_avg(), before));
  CHECK(after.exp_avg().device().is_cpu());
  // Stepping still updates the model's parameters (the optimizer still holds them).
  const auto weight = model->fc1->weight.detach().clone();
  optimizer->zero_grad();
  fabric.backward(model->forward(torch::ones({4, 1})).sum());
  fabric.step(*optimizer);
  CHECK_FALSE(torch::equal(weight, model->fc1->weight));
}

TEST_CASE("Fabric FP32 loop ends bit-identical to a hand-written LibTorch loop") {
  // The hand loop calls LibTorch's per-parameter Adam; Fabric steps through volt::optim::step, which by
  // default may pick fused or multi-tensor kernels (different rounding): ask for the same op order.
  volt::optim::ScopedDefaultImplementation same_order(volt::optim::Implementation::per_parameter);
  const auto data = regression_batches(10);
  torch::manual_seed(3);
  auto hand = std::make_shared<Mlp>();
  torch::manual_seed(3);
  auto model = std::make_shared<Mlp>();
  {
    torch::optim::Adam optimizer(hand->parameters(), torch::optim::AdamOptions(1e-2));
    for (int epoch = 0; epoch < 5; ++epoch) {
      for (const auto& batch : data) {
        optimizer.zero_grad();
        auto loss = torch::mse_loss(hand->forward(batch.data), batch.target);
        loss.backward();
        optimizer.step();
      }
    }
  }
  volt::Fabric<volt::CPU> fabric({.devices = 1});
  auto [net, optimizer] =
      fabric.setup(model, std::make_shared<torch::optim::Adam>(model->parameters(), torch::optim::AdamOptions(1e-2)));
  for (int epoch = 0; epoch < 5; ++epoch) {
    for (auto batch : fabric.setup_dataloaders(data)) {
      optimizer->zero_grad();
      torch::Tensor loss;
      {
        auto autocast = fabric.autocast();
        loss = torch::mse_loss(net->forward(batch.data), batch.target);
      }
      fabric.backward(loss);
      CHECK(fabric.step(*optimizer));
    }
  }
  for (std::size_t i = 0; i < hand->parameters().size(); ++i) {
    CHECK(torch::equal(hand->parameters()[i], model->parameters()[i]));
  }
}

TEST_CASE("Fabric example-style training reaches a low loss") {
  const auto data = regression_batches(16);
  volt::Fabric<volt::CPU> fabric({.devices = 1, .seed = 0});
  auto model = std::make_shared<Mlp>();
  auto [net, optimizer] =
      fabric.setup(model, std::make_shared<torch::optim::Adam>(model->parameters(), torch::optim::AdamOptions(2e-2)));
  auto mean_loss = [&] {
    torch::NoGradGuard no_grad;
    double total = 0;
    for (const auto& batch : data) total += torch::mse_loss(net->forward(batch.data), batch.target).item<double>();
    return total / static_cast<double>(data.size());
  };
  const double initial = mean_loss();
  auto loader = fabric.setup_dataloaders(data);
  for (int epoch = 0; epoch < 40; ++epoch) {
    for (auto batch : loader) {
      optimizer->zero_grad();
      torch::Tensor loss;
      {
        auto autocast = fabric.autocast();
        loss = torch::mse_loss(net->forward(batch.data), batch.target);
      }
      fabric.backward(loss);
      fabric.clip_gradients(net, *optimizer, {.max_norm = 5.0});
      fabric.step(*optimizer);
    }
  }
  const double final_loss = mean_loss();
  MESSAGE("sin(3x) regression, 640 steps: mean MSE " << initial << " -> " << final_loss);
  CHECK(initial > 0.1);
  CHECK(final_loss < 0.01);
}

TEST_CASE("Fabric clip_gradients: Lightning's argument errors, norm and value clipping") {
  volt::Fabric<volt::CPU> fabric({.devices = 1});
  auto model = std::make_shared<Mlp>();
  auto optimizer = std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.1));
  fabric.setup(model, optimizer);
  VOLT_CHECK_THROWS_CONTAINS(fabric.clip_gradients(model, *optimizer, {.max_norm = 1.0, .clip_val = 1.0}),
                             std::invalid_argument,
                             "Only one of `clip_val` or `max_norm` can be set as this specifies the underlying clipping algorithm!");
  VOLT_CHECK_THROWS_CONTAINS(fabric.clip_gradients(model, *optimizer, {}), std::invalid_argument,
                             "You have to specify either `clip_val` or `max_norm` to do gradient clipping!");
  auto gradients = [&] {
    optimizer->zero_grad();
    fabric.backward(model->forward(torch::full({8, 1}, 3.0)).sum() * 100);
  };
  auto total_norm = [&] {
    std::vector<torch::Tensor> norms;
    for (const auto& p : model->parameters()) norms.push_back(p.grad().norm());
    return torch::stack(norms).norm().item<double>();
  };
  gradients();
  const double before = total_norm();
  REQUIRE(before > 1.0);
  const auto returned = fabric.clip_gradients(model, *optimizer, {.max_norm = 1.0});
  REQUIRE(returned.has_value());
  CHECK(*returned == doctest::Approx(before).epsilon(1e-5));
  CHECK(total_norm() == doctest::Approx(1.0).epsilon(1e-4));

  gradients();
  CHECK_FALSE(fabric.clip_gradients(model, *optimizer, {.clip_val = 0.01}).has_value());
  for (const auto& p : model->parameters()) CHECK(p.grad().abs().max().item<double>() <= 0.01 + 1e-7);

  gradients();
  model->fc1->weight.mutable_grad().fill_(std::numeric_limits<float>::infinity());
  VOLT_CHECK_THROWS_CONTAINS(fabric.clip_gradients(model, *optimizer, {.max_norm = 1.0}), std::runtime_error,
                             "non-finite");
  CHECK_NOTHROW(fabric.clip_gradients(model, *optimizer, {.max_norm = 1.0, .error_if_nonfinite = false}));
}

TEST_CASE("Fabric with a GradScaler: scaled backward, unscale before clipping, skipped step on inf, scale updates") {
  volt::Fabric<volt::CPU, volt::SingleDevice, ScaledFP32> fabric({.devices = 1});
  REQUIRE(fabric.precision().scaler() != nullptr);
  auto model = std::make_shared<Mlp>();
  auto optimizer = std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.1));
  fabric.setup(model, optimizer);
  auto& scaler = *fabric.precision().scaler();
  const auto x = torch::full({4, 1}, 0.5);

  // backward scales the loss: gradients are 1024x the unscaled ones until unscaled.
  auto reference = std::make_shared<Mlp>();
  for (std::size_t i = 0; i < model->parameters().size(); ++i) {
    torch::NoGradGuard no_grad;
    reference->parameters()[i].copy_(model->parameters()[i]);
  }
  reference->forward(x).sum().backward();
  optimizer->zero_grad();
  fabric.backward(model->forward(x).sum());
  CHECK(torch::allclose(model->fc2->bias.grad(), reference->fc2->bias.grad() * 1024.0));

  // clip_gradients unscales first: clipping sees (and keeps) the true gradients.
  const auto norm = fabric.clip_gradients(model, *optimizer, {.max_norm = 1e6});
  CHECK(torch::allclose(model->fc2->bias.grad(), reference->fc2->bias.grad()));
  CHECK(*norm < 1e3);
  CHECK((scaler.stage(*optimizer) == volt::GradScaler::Stage::unscaled));
  // step does not unscale again (the gradients stay the true ones) and steps.
  const auto weight = model->fc2->weight.detach().clone();
  CHECK(fabric.step(*optimizer));
  CHECK(torch::allclose(model->fc2->weight, weight - 0.1 * reference->fc2->weight.grad()));
  CHECK(scaler.get_scale() == 1024.0);

  // A second finite step (growth_interval = 2) doubles the scale.
  optimizer->zero_grad();
  fabric.backward(model->forward(x).sum());
  CHECK(fabric.step(*optimizer));
  CHECK(scaler.get_scale() == 2048.0);

  // An inf loss: the step is skipped, the weights stay, the scale halves.
  const auto kept = model->fc1->weight.detach().clone();
  optimizer->zero_grad();
  fabric.backward(model->forward(x).sum() * std::numeric_limits<float>::infinity());
  CHECK_FALSE(fabric.step(*optimizer));
  CHECK(torch::equal(kept, model->fc1->weight));
  CHECK(scaler.get_scale() == 1024.0);

  // The scaler's state travels with fabric.save/load.
  volt_test::TempDir dir;
  fabric.save(dir.path / "scaled.ckpt", {{"model", model}});
  scaler.update(8.0);
  fabric.load(dir.path / "scaled.ckpt", {{"model", model}});
  CHECK(scaler.get_scale() == 1024.0);
}

TEST_CASE("Fabric FP16Autocast on Auto without a GPU runs as bf16 with Lightning's warning") {
  if (torch::cuda::is_available()) {
    MESSAGE("skipped: a CUDA device is present, so Auto resolves to CUDA");
    return;
  }
  if (!volt::compat::autocast_dtype_supported(torch::kCPU, torch::kBFloat16)) {
    MESSAGE("skipped: this LibTorch has no bf16 autocast on the CPU");
    return;
  }
  volt_test::CaptureLog log;
  volt::testing::ScopedMachine machine{{.cuda_device_count = 0, .torch_mps_available = false}};
  volt::Fabric<volt::Auto, volt::SingleDevice, volt::FP16Autocast> fabric({.devices = 1});
  CHECK(log.warned("AMP with fp16 is not supported on CPU"));
  CHECK(fabric.precision().scaler() == nullptr);
  auto model = fabric.setup_module(std::make_shared<Mlp>());
  torch::Tensor out;
  {
    auto autocast = fabric.autocast();
    out = model->fc1->forward(torch::ones({2, 1}));
  }
  CHECK((out.scalar_type() == torch::kBFloat16));
  CHECK((model->fc1->forward(torch::ones({2, 1})).scalar_type() == torch::kFloat));
}

TEST_CASE("CUDA: Fabric FP16Autocast scales the loss and skips a step on inf") {
  if (cuda_missing()) return;
  volt::Fabric<volt::CUDA, volt::SingleDevice, volt::FP16Autocast> fabric({.devices = 1});
  auto model = std::make_shared<Mlp>();
  auto optimizer = std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.1));
  fabric.setup(model, optimizer);
  CHECK(model->fc1->weight.device().is_cuda());
  auto& scaler = *fabric.precision().scaler();
  CHECK(scaler.get_scale() == 65536.0);
  const auto x = fabric.to_device(torch::ones({4, 1}));
  torch::Tensor loss;
  {
    auto autocast = fabric.autocast();
    loss = model->forward(x).sum();
    CHECK((model->fc1->forward(x).scalar_type() == torch::kHalf));
  }
  optimizer->zero_grad();
  fabric.backward(loss * std::numeric_limits<float>::infinity());
  const auto kept = model->fc1->weight.detach().clone();
  CHECK_FALSE(fabric.step(*optimizer));
  CHECK(torch::equal(kept, model->fc1->weight));
  CHECK(scaler.get_scale() == 32768.0);
  // A finite loss steps once the scale is small enough for fp16 gradients (each overflow halves it again).
  bool stepped = false;
  for (int attempt = 0; attempt < 12 && !stepped; ++attempt) {
    optimizer->zero_grad();
    {
      auto autocast = fabric.autocast();
      loss = model->forward(x).sum();
    }
    fabric.backward(loss);
    stepped = fabric.step(*optimizer);
  }
  CHECK(stepped);
  CHECK(scaler.get_scale() <= 32768.0);
  CHECK_FALSE(torch::equal(kept, model->fc1->weight));
}

TEST_CASE("Fabric to_device and setup_dataloaders place batches on the device; the loader is re-iterable") {
  volt::Fabric<volt::CPU> fabric({.devices = 1});
  auto moved = fabric.to_device(std::make_pair(torch::ones({2}), std::vector<torch::Tensor>{torch::zeros({1})}));
  CHECK(moved.first.device().is_cpu());
  const auto data = regression_batches(3);
  auto loader = fabric.setup_dataloaders(data);
  CHECK(loader.size() == 3);
  for (int pass = 0; pass < 2; ++pass) {
    int count = 0;
    for (auto batch : loader) {
      CHECK((batch.data.device() == fabric.device()));
      CHECK(torch::equal(batch.data, data[static_cast<std::size_t>(count)].data));
      ++count;
    }
    CHECK(count == 3);
  }
  // torch::data's loader (held by a std::unique_ptr) works too.
  auto dataset = torch::data::datasets::TensorDataset(torch::arange(10, torch::kFloat).reshape({10, 1}));
  auto torch_loader = torch::data::make_data_loader(std::move(dataset), torch::data::DataLoaderOptions(4));
  int torch_batches = 0;
  for (auto batch : fabric.setup_dataloaders(torch_loader)) {
    CHECK(batch.size() <= 4);
    ++torch_batches;
  }
  CHECK(torch_batches == 3);
}

TEST_CASE("Fabric save/load: resuming continues bit-identically; strict keys; errors name the file") {
  volt_test::TempDir dir;
  const auto data = regression_batches(6);
  volt::Fabric<volt::CPU> fabric({.devices = 1});
  auto train = [&](std::shared_ptr<Mlp>& model, std::shared_ptr<torch::optim::Adam>& optimizer, int from, int to) {
    for (int i = from; i < to; ++i) {
      const auto& batch = data[static_cast<std::size_t>(i) % data.size()];
      optimizer->zero_grad();
      fabric.backward(torch::mse_loss(model->forward(batch.data), batch.target));
      fabric.step(*optimizer);
    }
  };
  torch::manual_seed(1);
  auto model = std::make_shared<Mlp>();
  auto optimizer = std::make_shared<torch::optim::Adam>(model->parameters(), torch::optim::AdamOptions(1e-2));
  fabric.setup(model, optimizer);
  train(model, optimizer, 0, 5);
  std::int64_t step = 5;
  torch::Tensor marker = torch::tensor({1.5, 2.5});
  double best = 0.25;
  fabric.save(dir.path / "ckpt" / "last.ckpt", {{"model", model}, {"optimizer", optimizer}, {"step", step},
                                                {"marker", marker}, {"best", best}});
  int files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path / "ckpt")) ++files;
  CHECK(files == 1);  // no temporary file left behind
  train(model, optimizer, 5, 12);

  volt::Fabric<volt::CPU> resumed_fabric({.devices = 1});
  auto resumed = std::make_shared<Mlp>();
  auto resumed_optimizer = std::make_shared<torch::optim::Adam>(resumed->parameters(), torch::optim::AdamOptions(1e-2));
  resumed_fabric.setup(resumed, resumed_optimizer);
  std::int64_t resumed_step = 0;
  torch::Tensor resumed_marker;
  double resumed_best = 0;
  const auto remainder = resumed_fabric.load(dir.path / "ckpt" / "last.ckpt",
                                             {{"model", resumed}, {"optimizer", resumed_optimizer},
                                              {"step", resumed_step}, {"marker", resumed_marker}});
  CHECK(remainder == std::vector<std::string>{"best"});
  CHECK(resumed_step == 5);
  CHECK(torch::equal(resumed_marker, marker));
  train(resumed, resumed_optimizer, 5, 12);
  for (std::size_t i = 0; i < model->parameters().size(); ++i) {
    CHECK(torch::equal(model->parameters()[i], resumed->parameters()[i]));
  }
  CHECK(fabric.load(dir.path / "ckpt" / "last.ckpt", {{"best", resumed_best}}).size() == 4);
  CHECK(resumed_best == 0.25);

  std::int64_t absent = 0;
  VOLT_CHECK_THROWS_CONTAINS(fabric.load(dir.path / "ckpt" / "last.ckpt", {{"epoch", absent}}), std::runtime_error,
                             "The requested state contains a key 'epoch' that does not exist in the loaded checkpoint. "
                             "To disable strict loading, set `strict=False`.");
  CHECK(fabric.load(dir.path / "ckpt" / "last.ckpt", {{"epoch", absent}}, /*strict=*/false).size() == 5);
  VOLT_CHECK_THROWS_CONTAINS(fabric.load(dir.path / "missing.ckpt", {{"model", model}}), volt::CheckpointError,
                             "missing.ckpt");
  auto wrong_shape = std::make_shared<torch::nn::LinearImpl>(5, 5);
  VOLT_CHECK_THROWS_CONTAINS(fabric.load(dir.path / "ckpt" / "last.ckpt", {{"model", wrong_shape}}),
                             volt::CheckpointError, "the entry 'model' of");
}

TEST_CASE("Fabric strategy services are identities for SingleDevice") {
  volt::Fabric<volt::CPU> fabric({.devices = 1});
  CHECK(fabric.world_size() == 1);
  CHECK(fabric.global_rank() == 0);
  CHECK(fabric.local_rank() == 0);
  CHECK(fabric.node_rank() == 0);
  CHECK(fabric.is_global_zero());
  fabric.barrier();
  fabric.barrier("named");
  const auto value = torch::tensor({1.0, 3.0});
  CHECK(torch::equal(fabric.all_reduce(value), value));
  CHECK(torch::equal(fabric.all_reduce(value, "sum"), value));
  VOLT_CHECK_THROWS_CONTAINS(fabric.all_reduce(value, "median"), std::invalid_argument, "unsupported reduce op 'median'");
  CHECK(torch::equal(fabric.all_gather(value), value));
  CHECK(fabric.broadcast(std::string("hello")) == "hello");
  CHECK(fabric.broadcast(7, 0) == 7);

  auto model = std::make_shared<Mlp>();
  VOLT_CHECK_THROWS_CONTAINS((void)fabric.no_backward_sync(model), std::invalid_argument,
                             "You need to set up the model first before you can call `fabric.no_backward_sync()`");
  fabric.setup_module(model);
  {
    auto guard = fabric.no_backward_sync(model);
    fabric.backward(model->forward(torch::ones({1, 1})).sum());
  }
  CHECK(model->fc1->weight.grad().defined());  // gradients still computed on one device
}

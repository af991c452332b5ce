// Manual optimization and several optimizers in the Trainer (Lightning's loops/optimization/manual.py and
// core/optimizer.py). The counts and messages were recorded with Lightning 2.6.6: two optimizers stepped in
// each of 4 batches give global_step 8 and logger rows at steps 0..3; max_steps=3 stops after 2 batches with
// global_step 4.
#include <torch/torch.h>

#include <doctest/doctest.h>

#include <volt/volt.hpp>

#include "test_common.hpp"
#include "trainer/trainer_fixtures.hpp"

#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

using volt_test::copy_parameters;

using volt_test::quiet_options;
using volt_test::TempDir;

namespace {

struct RecordingLogger : volt::Logger {
  std::vector<std::pair<std::int64_t, std::map<std::string, double>>> rows;
  void log_metrics(const std::map<std::string, double>& metrics, std::int64_t step) override {
    rows.emplace_back(step, metrics);
  }
  void log_hyperparams(const std::map<std::string, std::string>&) override {}
  std::filesystem::path log_dir() const override { return "."; }
};

/// The automatic reference: SGD with momentum, optionally clipped by the Trainer.
struct AutoModel : torch::nn::Module {
  torch::nn::Linear linear{torch::nn::Linear(2, 1)};
  AutoModel() { register_module("linear", linear); }
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t) {
    return torch::mse_loss(linear->forward(batch.data), batch.target);
  }
  std::shared_ptr<torch::optim::SGD> configure_optimizers() {
    return std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  }
};

/// The same model stepping itself.
struct ManualModel : AutoModel {
  static constexpr bool automatic_optimization = false;
  double clip = 0.0;
  volt::GradClipAlgorithm algorithm = volt::GradClipAlgorithm::norm;
  std::vector<std::int64_t> global_steps_seen;
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t, volt::StepContext& ctx) {
    auto& optimizer = ctx.optimizer();
    auto loss = torch::mse_loss(linear->forward(batch.data), batch.target);
    optimizer.zero_grad();
    ctx.manual_backward(loss);
    ctx.clip_gradients(optimizer, clip, algorithm);
    optimizer.step();
    global_steps_seen.push_back(ctx.global_step());
    return loss;
  }
};

/// Two sub-models, each with its own optimizer (and, optionally, schedulers), stepped in turn.
struct TwoOptimizers : torch::nn::Module {
  static constexpr bool automatic_optimization = false;
  torch::nn::Linear a{torch::nn::Linear(2, 1)};
  torch::nn::Linear b{torch::nn::Linear(2, 1)};
  bool with_schedulers = false;
  bool step_schedulers = false;
  std::size_t optimizers_seen = 0, schedulers_seen = 0;
  TwoOptimizers() {
    register_module("a", a);
    register_module("b", b);
  }
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t, volt::StepContext& ctx) {
    optimizers_seen = ctx.optimizers().size();
    schedulers_seen = ctx.lr_schedulers().size();
    torch::Tensor last;
    for (auto* part : {&a, &b}) {
      auto& optimizer = ctx.optimizers()[part == &a ? 0 : 1];
      last = torch::mse_loss((*part)->forward(batch.data), batch.target);
      optimizer.zero_grad();
      ctx.manual_backward(last);
      optimizer.step();
    }
    ctx.log("gs", static_cast<double>(ctx.global_step()));
    if (step_schedulers) {
      for (auto& scheduler : ctx.lr_schedulers()) scheduler.step();
    }
    return last;
  }
  std::vector<volt::OptimizerConfig> configure_optimizers() {
    auto first = std::make_shared<torch::optim::Adam>(a->parameters(), torch::optim::AdamOptions(0.01));
    auto second = std::make_shared<torch::optim::SGD>(b->parameters(), torch::optim::SGDOptions(0.1).momentum(0.5));
    if (!with_schedulers) return {{first}, {second}};
    volt::OptimizerConfig second_config{second};
    second_config.lr_schedulers.push_back({std::make_shared<torch::optim::StepLR>(*second, 2, 0.5),
                                           volt::SchedulerInterval::step, 1, "b-step"});
    second_config.lr_schedulers.push_back({std::make_shared<torch::optim::StepLR>(*second, 1, 0.9)});
    return {{first, std::make_shared<torch::optim::StepLR>(*first, 1, 0.5)}, std::move(second_config)};
  }
};

/// Several optimizers with automatic optimization (refused).
struct TwoOptimizersAutomatic : torch::nn::Module {
  torch::nn::Linear a{torch::nn::Linear(2, 1)};
  TwoOptimizersAutomatic() { register_module("a", a); }
  torch::Tensor training_step(const torch::data::Example<>& batch) {
    return torch::mse_loss(a->forward(batch.data), batch.target);
  }
  std::vector<std::shared_ptr<torch::optim::Optimizer>> configure_optimizers() {
    return {std::make_shared<torch::optim::SGD>(a->parameters(), torch::optim::SGDOptions(0.1)),
            std::make_shared<torch::optim::SGD>(a->parameters(), torch::optim::SGDOptions(0.1))};
  }
};

void check_same_parameters(torch::nn::Module& a, torch::nn::Module& b) {
  const auto pa = a.named_parameters();
  const auto pb = b.named_parameters();
  REQUIRE(pa.size() == pb.size());
  for (const auto& item : pa) CHECK_MESSAGE(torch::equal(item.value(), pb[item.key()]), item.key());
}

}  // namespace

TEST_CASE("manual optimization is detected at compile time") {
  static_assert(volt::detail::uses_automatic_optimization<AutoModel>());
  static_assert(!volt::detail::uses_automatic_optimization<ManualModel>());
  static_assert(!volt::detail::uses_automatic_optimization<TwoOptimizers>());
}

TEST_CASE("manual optimization gives the automatic run's weights bit for bit (CPU, one optimizer)") {
  for (const double clip : {0.0, 0.05}) {
    for (const auto algorithm : {volt::GradClipAlgorithm::norm, volt::GradClipAlgorithm::value}) {
      CAPTURE(clip);
      CAPTURE(static_cast<int>(algorithm));
      TempDir dir;
      auto automatic = std::make_shared<AutoModel>();
      auto manual = std::make_shared<ManualModel>();
      copy_parameters(*automatic, *manual);
      manual->clip = clip;
      manual->algorithm = algorithm;
      auto options = quiet_options(dir);
      options.max_epochs = 3;
      auto auto_options = options;
      if (clip > 0) {
        auto_options.gradient_clip_val = clip;
        auto_options.gradient_clip_algorithm = algorithm;
      }
      volt::Trainer<volt::CPU> auto_trainer(auto_options);
      auto_trainer.fit(automatic, volt_test::make_batches(5));
      volt::Trainer<volt::CPU> manual_trainer(options);
      manual_trainer.fit(manual, volt_test::make_batches(5));
      CHECK(auto_trainer.global_step() == 15);
      CHECK(manual_trainer.global_step() == 15);
      check_same_parameters(*automatic, *manual);
      // The step count is visible inside training_step right after each optimizer step.
      REQUIRE(manual->global_steps_seen.size() == 15);
      for (std::size_t i = 0; i < 15; ++i) CHECK(manual->global_steps_seen[i] == static_cast<std::int64_t>(i + 1));
    }
  }
}

TEST_CASE("manual optimization counts one global step per optimizer step and logs once per batch") {
  TempDir dir;
  auto model = std::make_shared<TwoOptimizers>();
  auto logger = std::make_shared<RecordingLogger>();
  auto options = quiet_options(dir);
  options.log_every_n_steps = 1;
  options.logger = true;
  volt::Trainer<volt::CPU> trainer(options, logger);
  trainer.fit(model, volt_test::make_batches(4));
  CHECK(trainer.global_step() == 8);
  CHECK(model->optimizers_seen == 2);
  CHECK(model->schedulers_seen == 0);
  std::vector<std::pair<std::int64_t, double>> logged;
  for (const auto& [step, metrics] : logger->rows) {
    if (metrics.count("gs") != 0) logged.emplace_back(step, metrics.at("gs"));
  }
  // Lightning 2.6.6: [(0, 2.0), (1, 4.0), (2, 6.0), (3, 8.0)].
  CHECK(logged == std::vector<std::pair<std::int64_t, double>>{{0, 2.0}, {1, 4.0}, {2, 6.0}, {3, 8.0}});
}

TEST_CASE("max_steps counts optimizer steps under manual optimization") {
  TempDir dir;
  auto model = std::make_shared<TwoOptimizers>();
  auto options = quiet_options(dir);
  options.max_steps = 3;
  options.max_epochs = -1;
  volt::Trainer<volt::CPU> trainer(options);
  trainer.fit(model, volt_test::make_batches(4));
  // Lightning 2.6.6: stops after 2 batches with global_step 4.
  CHECK(trainer.global_step() == 4);
}

TEST_CASE("manual optimization refuses gradient_clip_val and accumulate_grad_batches with Lightning's messages") {
  TempDir dir;
  {
    auto options = quiet_options(dir);
    options.accumulate_grad_batches = 2;
    volt::Trainer<volt::CPU> trainer(options);
    auto model = std::make_shared<TwoOptimizers>();
    CHECK_THROWS_WITH_AS(trainer.fit(model, volt_test::make_batches(2)),
                         "Automatic gradient accumulation is not supported for manual optimization. Remove "
                         "`Trainer(accumulate_grad_batches=2)` or switch to automatic optimization.",
                         volt::MisconfigurationError);
  }
  {
    auto options = quiet_options(dir);
    options.gradient_clip_val = 0.5;
    volt::Trainer<volt::CPU> trainer(options);
    auto model = std::make_shared<TwoOptimizers>();
    CHECK_THROWS_WITH_AS(trainer.fit(model, volt_test::make_batches(2)),
                         "Automatic gradient clipping is not supported for manual optimization. Remove "
                         "`Trainer(gradient_clip_val=0.5)` or switch to automatic optimization.",
                         volt::MisconfigurationError);
  }
  {
    // gradient_clip_val = 0 clips nothing and is allowed, as in Lightning.
    auto options = quiet_options(dir);
    options.gradient_clip_val = 0.0;
    volt::Trainer<volt::CPU> trainer(options);
    auto model = std::make_shared<TwoOptimizers>();
    trainer.fit(model, volt_test::make_batches(2));
    CHECK(trainer.global_step() == 4);
  }
}

TEST_CASE("several optimizers with automatic optimization are refused with Lightning's message") {
  TempDir dir;
  volt::Trainer<volt::CPU> trainer(quiet_options(dir));
  auto model = std::make_shared<TwoOptimizersAutomatic>();
  CHECK_THROWS_WITH_AS(trainer.fit(model, volt_test::make_batches(2)),
                       "Training with multiple optimizers is only supported with manual optimization. Set "
                       "`self.automatic_optimization = False`, then access your optimizers in `training_step` "
                       "with `opt1, opt2, ... = self.optimizers()`.",
                       std::runtime_error);
}

TEST_CASE("the manual-optimization context is refused under automatic optimization") {
  struct Asking : AutoModel {
    torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t, volt::StepContext& ctx) {
      (void)ctx.optimizers();
      return torch::mse_loss(linear->forward(batch.data), batch.target);
    }
  };
  TempDir dir;
  volt::Trainer<volt::CPU> trainer(quiet_options(dir));
  auto model = std::make_shared<Asking>();
  CHECK_THROWS_WITH_AS(trainer.fit(model, volt_test::make_batches(1)),
                       doctest::Contains("ctx.optimizers() is for manual optimization"), volt::MisconfigurationError);
}

TEST_CASE("under manual optimization the Trainer does not step the schedulers; the model does") {
  TempDir dir;
  auto options = quiet_options(dir);
  options.max_epochs = 2;
  for (const bool model_steps : {false, true}) {
    auto model = std::make_shared<TwoOptimizers>();
    model->with_schedulers = true;
    model->step_schedulers = model_steps;
    volt::Trainer<volt::CPU> trainer(options);
    trainer.fit(model, volt_test::make_batches(3));
    CHECK(model->schedulers_seen == 3);
    const auto& optimizers = trainer.state().optimizers;
    REQUIRE(optimizers.size() == 2);
    const double lr_a = static_cast<torch::optim::AdamOptions&>(optimizers[0]->param_groups()[0].options()).lr();
    const double lr_b = static_cast<torch::optim::SGDOptions&>(optimizers[1]->param_groups()[0].options()).lr();
    if (!model_steps) {
      CHECK(lr_a == 0.01);
      CHECK(lr_b == 0.1);
    } else {
      // 6 calls of each; a LibTorch scheduler's first step() leaves the rate as it is (PyTorch's constructor
      // takes that step), so StepLR(1, 0.5) decays 5 times, StepLR(2, 0.5) twice, StepLR(1, 0.9) 5 times.
      CHECK(lr_a == doctest::Approx(0.01 * std::pow(0.5, 5)));
      CHECK(lr_b == doctest::Approx(0.1 * std::pow(0.5, 2) * std::pow(0.9, 5)));
    }
  }
}

TEST_CASE("automatic optimization steps every configured scheduler by its interval and frequency") {
  struct Scheduled : AutoModel {
    std::shared_ptr<torch::optim::SGD> optimizer;
    volt::OptimizerConfig configure_optimizers() {
      optimizer = std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(1.0));
      volt::OptimizerConfig config{optimizer};
      config.lr_schedulers.push_back({std::make_shared<torch::optim::StepLR>(*optimizer, 1, 0.5),
                                      volt::SchedulerInterval::step, 2, "every-2-steps"});
      config.lr_schedulers.push_back({std::make_shared<torch::optim::StepLR>(*optimizer, 1, 0.1)});
      return config;
    }
  };
  TempDir dir;
  auto options = quiet_options(dir);
  options.max_epochs = 2;
  auto model = std::make_shared<Scheduled>();
  volt::Trainer<volt::CPU> trainer(options);
  trainer.fit(model, volt_test::make_batches(3));
  // 3 batches per epoch: the step-interval frequency counts each epoch's batches (Lightning's batch_idx + 1),
  // so batch 1 of each epoch steps the first scheduler (2 calls, 1 halving: a LibTorch scheduler's first step()
  // changes nothing); 2 epochs step the second (2 calls, one tenth).
  const double lr = static_cast<torch::optim::SGDOptions&>(model->optimizer->param_groups()[0].options()).lr();
  CHECK(lr == doctest::Approx(0.5 * 0.1));
}

TEST_CASE("checkpoints hold every optimizer and scheduler; a manual fit resumes exactly from any of them") {
  TempDir dir;
  auto data = volt_test::make_batches(3);
  auto run = [&](const std::filesystem::path& resume_from, const std::filesystem::path& save_dir) {
    torch::manual_seed(3);
    auto model = std::make_shared<TwoOptimizers>();
    model->with_schedulers = true;
    model->step_schedulers = true;
    auto options = quiet_options(dir);
    options.max_epochs = 4;
    options.enable_checkpointing = true;
    volt::Trainer<volt::CPU> trainer(
        options, volt::ModelCheckpoint{{.dirpath = save_dir, .save_top_k = -1, .every_n_train_steps = 4}});
    if (resume_from.empty()) torch::manual_seed(5);
    trainer.fit(model, volt_test::ShuffledData{&data}, resume_from);
    const auto& optimizers = trainer.state().optimizers;
    REQUIRE(optimizers.size() == 2);
    const double lr = static_cast<torch::optim::SGDOptions&>(optimizers[1]->param_groups()[0].options()).lr();
    return std::make_tuple(model, trainer.global_step(), lr);
  };
  const auto [straight, straight_steps, straight_lr] = run({}, dir.path / "a");
  CHECK(straight_steps == 24);
  std::vector<std::filesystem::path> checkpoints;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path / "a")) checkpoints.push_back(entry.path());
  // every 4 optimizer steps = every 2 batches: mid-epoch and epoch-end checkpoints both.
  CHECK(checkpoints.size() == 6);
  int index = 0;
  for (const auto& checkpoint : checkpoints) {
    CAPTURE(checkpoint.filename().string());
    const auto [resumed, steps, lr] = run(checkpoint, dir.path / ("r" + std::to_string(index++)));
    CHECK(steps == 24);
    CHECK(lr == straight_lr);
    check_same_parameters(*straight, *resumed);
  }

  // A checkpoint of two optimizers does not resume a fit configured with one.
  struct OneOptimizer : TwoOptimizers {
    std::shared_ptr<torch::optim::SGD> configure_optimizers() {
      return std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(0.1));
    }
  };
  auto one = std::make_shared<OneOptimizer>();
  volt::Trainer<volt::CPU> mismatched(quiet_options(dir));
  CHECK_THROWS_WITH_AS(mismatched.fit(one, data, checkpoints.front()),
                       doctest::Contains("holds the state of 2 optimizer(s), but configure_optimizers() returned 1"),
                       volt::CheckpointError);
}

namespace docs_example {
// The example of docs/optimization.md, as written there.
struct Gan : torch::nn::Module {
  static constexpr bool automatic_optimization = false;  // Lightning's self.automatic_optimization = False
  torch::nn::Linear generator{torch::nn::Linear(8, 2)}, discriminator{torch::nn::Linear(2, 1)};
  Gan() {
    register_module("generator", generator);
    register_module("discriminator", discriminator);
  }

  void training_step(const torch::data::Example<>& batch, int64_t, volt::StepContext& ctx) {
    auto& opt_g = ctx.optimizer(0);  // or: auto& [opt_g, opt_d] = ...; ctx.optimizers() is the list
    auto& opt_d = ctx.optimizer(1);
    auto fake = generator->forward(torch::randn({batch.data.size(0), 8}));

    auto loss_d = torch::softplus(-discriminator->forward(batch.data)).mean() +
                  torch::softplus(discriminator->forward(fake.detach())).mean();
    opt_d.zero_grad();
    ctx.manual_backward(loss_d);                      // scaled under FP16Autocast, reduced under DDP
    ctx.clip_gradients(opt_d, 1.0, volt::GradClipAlgorithm::norm);
    opt_d.step();                                     // global_step + 1

    auto loss_g = torch::softplus(-discriminator->forward(fake)).mean();
    opt_g.zero_grad();
    ctx.manual_backward(loss_g);
    opt_g.step();                                     // global_step + 1
    ctx.log("loss_d", loss_d);
    ctx.log("loss_g", loss_g);
    for (auto& scheduler : ctx.lr_schedulers()) scheduler.step();  // the Trainer does not step them
  }

  std::vector<volt::OptimizerConfig> configure_optimizers() {
    auto g = std::make_shared<torch::optim::Adam>(generator->parameters(), torch::optim::AdamOptions(2e-4));
    auto d = std::make_shared<torch::optim::Adam>(discriminator->parameters(), torch::optim::AdamOptions(2e-4));
    return {{g}, {d, std::make_shared<torch::optim::StepLR>(*d, 10, 0.5)}};
  }
};
}  // namespace docs_example

TEST_CASE("the example of docs/optimization.md trains: both optimizers step, the generator learns from the critic") {
  TempDir dir;
  auto options = quiet_options(dir);
  options.max_epochs = 2;
  torch::manual_seed(0);
  auto model = std::make_shared<docs_example::Gan>();
  const auto generator_before = model->generator->weight.detach().clone();
  const auto discriminator_before = model->discriminator->weight.detach().clone();
  volt::Trainer<volt::CPU, volt::SingleDevice, volt::BF16Autocast> trainer(options);
  trainer.fit(model, volt_test::make_batches(3));
  CHECK(trainer.global_step() == 12);
  CHECK(!torch::equal(model->generator->weight, generator_before));
  CHECK(!torch::equal(model->discriminator->weight, discriminator_before));
  CHECK(trainer.state().metric("loss_d").has_value());
}

namespace {

/// Records the backward and optimizer-step hooks of the model and of a callback, in the order they run.
struct HookedManual : AutoModel {
  static constexpr bool automatic_optimization = false;
  std::shared_ptr<std::vector<std::string>> calls = std::make_shared<std::vector<std::string>>();
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t, volt::StepContext& ctx) {
    auto& optimizer = ctx.optimizer();
    auto loss = torch::mse_loss(linear->forward(batch.data), batch.target);
    optimizer.zero_grad();
    ctx.manual_backward(loss);
    optimizer.step();
    return loss;
  }
  void on_before_backward(const torch::Tensor&) { calls->push_back("model:on_before_backward"); }
  void on_after_backward() { calls->push_back("model:on_after_backward"); }
  void on_before_optimizer_step(torch::optim::Optimizer&) { calls->push_back("model:on_before_optimizer_step"); }
};

struct BackwardHooksCallback {
  std::shared_ptr<std::vector<std::string>> calls;
  template <class State>
  void on_before_backward(State&, const torch::Tensor&) { calls->push_back("callback:on_before_backward"); }
  template <class State>
  void on_after_backward(State&) { calls->push_back("callback:on_after_backward"); }
  template <class State>
  void on_before_optimizer_step(State&, torch::optim::Optimizer&) {
    calls->push_back("callback:on_before_optimizer_step");
  }
};

}  // namespace

TEST_CASE("manual optimization calls the model's backward and optimizer-step hooks after the callbacks'") {
  TempDir dir;
  auto model = std::make_shared<HookedManual>();
  volt::Trainer<volt::CPU> trainer(quiet_options(dir), BackwardHooksCallback{model->calls});
  trainer.fit(model, volt_test::make_batches(2));
  // Lightning: manual_backward runs on_before_backward / on_after_backward (callbacks, then the module), and
  // optimizer.step() runs on_before_optimizer_step the same way.
  const std::vector<std::string> one_batch{"callback:on_before_backward",       "model:on_before_backward",
                                           "callback:on_after_backward",        "model:on_after_backward",
                                           "callback:on_before_optimizer_step", "model:on_before_optimizer_step"};
  std::vector<std::string> expected = one_batch;
  expected.insert(expected.end(), one_batch.begin(), one_batch.end());
  CHECK(*model->calls == expected);
}

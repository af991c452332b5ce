// volt::optim's LR schedulers: closed forms by hand, PyTorch's argument checks, and use with the Trainer
// (step-interval scheduling, exact resume). The step-by-step comparison with PyTorch itself is
// schedulers_vs_pytorch.py (volt.optim.schedulers_vs_pytorch, in the tree that has VOLT_PYTHON).
#include <torch/torch.h>

#include <doctest/doctest.h>

#include <volt/volt.hpp>

#include "trainer/trainer_fixtures.hpp"

#include <cmath>
#include <filesystem>
#include <memory>
#include <numbers>
#include <stdexcept>
#include <vector>

namespace {

torch::Tensor parameter() { return torch::zeros({2}, torch::requires_grad()); }

double lr_of(torch::optim::Optimizer& optimizer) { return optimizer.param_groups()[0].options().get_lr(); }

}  // namespace

TEST_CASE("LinearLR warms up from start_factor to end_factor over total_iters steps, then stays") {
  torch::optim::SGD sgd({parameter()}, torch::optim::SGDOptions(0.1));
  volt::optim::LinearLR scheduler(sgd, 0.25, 1.0, 4);
  CHECK(lr_of(sgd) == doctest::Approx(0.025));  // set at construction, as PyTorch does
  const std::vector<double> expected{0.04375, 0.0625, 0.08125, 0.1, 0.1, 0.1};
  for (double value : expected) {
    scheduler.step();
    CHECK(lr_of(sgd) == doctest::Approx(value));
  }
  CHECK(scheduler.last_epoch() == 6);
  CHECK_THROWS_WITH_AS(volt::optim::LinearLR(sgd, 0.0),
                       "Starting multiplicative factor expected to be greater than 0 and less or equal to 1.",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(volt::optim::LinearLR(sgd, 0.5, 1.5),
                       "Ending multiplicative factor expected to be between 0 and 1.", std::invalid_argument);
}

TEST_CASE("CosineAnnealingLR follows eta_min + (base - eta_min)(1 + cos(pi t / T_max)) / 2") {
  torch::optim::SGD sgd({parameter()}, torch::optim::SGDOptions(0.1));
  volt::optim::CosineAnnealingLR scheduler(sgd, 4, 0.01);
  CHECK(lr_of(sgd) == doctest::Approx(0.1));
  for (int t = 1; t <= 8; ++t) {
    scheduler.step();
    CHECK(lr_of(sgd) == doctest::Approx(0.01 + 0.09 * (1 + std::cos(std::numbers::pi * t / 4)) / 2));
  }
  CHECK(lr_of(sgd) == doctest::Approx(0.1));  // periodic past T_max
}

TEST_CASE("LambdaLR multiplies each group's base rate by its function of the step") {
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<torch::Tensor>{parameter()}, std::make_unique<torch::optim::SGDOptions>(0.1));
  groups.emplace_back(std::vector<torch::Tensor>{parameter()}, std::make_unique<torch::optim::SGDOptions>(1.0));
  torch::optim::SGD sgd(groups, torch::optim::SGDOptions(0.1));
  volt::optim::LambdaLR scheduler(sgd, [](std::int64_t t) { return 1.0 / static_cast<double>(t + 1); });
  scheduler.step();
  scheduler.step();
  CHECK(sgd.param_groups()[0].options().get_lr() == doctest::Approx(0.1 / 3));
  CHECK(sgd.param_groups()[1].options().get_lr() == doctest::Approx(1.0 / 3));
  CHECK_THROWS_WITH_AS(volt::optim::LambdaLR(sgd, std::vector<volt::optim::LambdaLR::Lambda>{[](std::int64_t) { return 1.0; }}),
                       "Expected 2 lr_lambdas, but got 1", std::invalid_argument);
}

TEST_CASE("OneCycleLR: up to max_lr at pct_start, down to min_lr at the end, momentum the other way") {
  torch::optim::SGD sgd({parameter()}, torch::optim::SGDOptions(0.1).momentum(0.9));
  volt::optim::OneCycleLR scheduler(sgd, {.max_lr = 1.0, .total_steps = 10});
  auto momentum = [&] { return static_cast<torch::optim::SGDOptions&>(sgd.param_groups()[0].options()).momentum(); };
  CHECK(lr_of(sgd) == doctest::Approx(1.0 / 25));
  CHECK(momentum() == doctest::Approx(0.95));
  scheduler.step();
  scheduler.step();  // step 2 = pct_start * 10 - 1: the peak
  CHECK(lr_of(sgd) == doctest::Approx(1.0));
  CHECK(momentum() == doctest::Approx(0.85));
  for (int i = 0; i < 7; ++i) scheduler.step();  // step 9 = total_steps - 1: the end
  CHECK(lr_of(sgd) == doctest::Approx(1.0 / 25 / 1e4));
  CHECK(momentum() == doctest::Approx(0.95));
  scheduler.step();  // step 10 is past the cycle's last step (PyTorch allows it too) ...
  CHECK_THROWS_WITH_AS(scheduler.step(), "Tried to step 11 times. The specified number of total steps is 10",
                       std::out_of_range);  // ... step 11 is not
  // Adagrad has neither momentum nor betas (PyTorch's check: neither key in the optimizer's defaults).
  torch::optim::Adagrad adagrad({parameter()}, torch::optim::AdagradOptions(0.1));
  CHECK_THROWS_WITH_AS(volt::optim::OneCycleLR(adagrad, {.max_lr = 1.0, .total_steps = 10}),
                       "optimizer must support momentum or beta1 with `cycle_momentum` option enabled",
                       std::invalid_argument);
  CHECK_NOTHROW(volt::optim::OneCycleLR(adagrad, {.max_lr = 1.0, .total_steps = 10, .cycle_momentum = false}));
}

TEST_CASE("OneCycleLR: the cycle as epochs x steps_per_epoch, RMSprop's momentum cycled, PyTorch's argument errors") {
  torch::optim::RMSprop rmsprop({parameter()}, torch::optim::RMSpropOptions(0.1).momentum(0.9));
  volt::optim::OneCycleLR scheduler(rmsprop, {.max_lr = 1.0, .epochs = 2, .steps_per_epoch = 5});
  auto momentum = [&] { return static_cast<torch::optim::RMSpropOptions&>(rmsprop.param_groups()[0].options()).momentum(); };
  CHECK(momentum() == doctest::Approx(0.95));
  scheduler.step();
  scheduler.step();  // step 2 = pct_start * 2 * 5 - 1: the peak, as with total_steps = 10
  CHECK(lr_of(rmsprop) == doctest::Approx(1.0));
  CHECK(momentum() == doctest::Approx(0.85));
  for (int i = 0; i < 8; ++i) scheduler.step();
  CHECK_THROWS_WITH_AS(scheduler.step(), "Tried to step 11 times. The specified number of total steps is 10",
                       std::out_of_range);
  // total_steps wins over epochs and steps_per_epoch, as in PyTorch.
  volt::optim::OneCycleLR both(rmsprop, {.max_lr = 1.0, .total_steps = 4, .epochs = 2, .steps_per_epoch = 5});
  CHECK(both.lrs_at(4).size() == 1);
  CHECK_THROWS_AS(both.lrs_at(5), std::out_of_range);

  torch::optim::SGD sgd({parameter()}, torch::optim::SGDOptions(0.1).momentum(0.9));
  const auto error = [&](volt::optim::OneCycleOptions options) {
    try {
      volt::optim::OneCycleLR bad(sgd, options);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(error({.max_lr = 1.0}) == "You must define either total_steps OR (epochs AND steps_per_epoch)");
  CHECK(error({.max_lr = 1.0, .epochs = 3}) == "You must define either total_steps OR (epochs AND steps_per_epoch)");
  CHECK(error({.max_lr = 1.0, .total_steps = 0}) == "Expected positive integer total_steps, but got 0");
  CHECK(error({.max_lr = 1.0, .epochs = 0, .steps_per_epoch = 5}) == "Expected positive integer epochs, but got 0");
  CHECK(error({.max_lr = 1.0, .epochs = 2, .steps_per_epoch = -1}) ==
        "Expected positive integer steps_per_epoch, but got -1");
}

TEST_CASE("SequentialLR hands over at the milestones, the next scheduler restarting from its step 0") {
  torch::optim::SGD sgd({parameter()}, torch::optim::SGDOptions(0.1));
  auto warmup = std::make_shared<volt::optim::LinearLR>(sgd, 0.1, 1.0, 3);
  auto cosine = std::make_shared<volt::optim::CosineAnnealingLR>(sgd, 4);
  volt::optim::SequentialLR scheduler(sgd, {warmup, cosine}, {3});
  CHECK(lr_of(sgd) == doctest::Approx(0.01));
  scheduler.step();
  CHECK(lr_of(sgd) == doctest::Approx(0.04));
  scheduler.step();
  scheduler.step();  // the milestone: the cosine's step 0, the base rate (not the warm-up's 0.01 base)
  CHECK(lr_of(sgd) == doctest::Approx(0.1));
  scheduler.step();
  CHECK(lr_of(sgd) == doctest::Approx(0.1 * (1 + std::cos(std::numbers::pi / 4)) / 2));
  CHECK_THROWS_WITH_AS(volt::optim::SequentialLR(sgd, {warmup, cosine}, {}),
                       "Sequential Schedulers expects number of schedulers provided to be one more than the number of "
                       "milestone points, but got number of schedulers 2 and the number of milestones to be equal to 0",
                       std::invalid_argument);
  torch::optim::SGD other({parameter()}, torch::optim::SGDOptions(0.1));
  CHECK_THROWS_AS(volt::optim::SequentialLR(other, {warmup}, {}), std::invalid_argument);
}

namespace {

struct ScheduledRegressor : volt_test::Regressor {
  std::shared_ptr<torch::optim::SGD> optimizer;
  volt::OptimizerConfig configure_optimizers() {
    optimizer = std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
    auto warmup = std::make_shared<volt::optim::LinearLR>(*optimizer, 0.2, 1.0, 4);
    auto schedule = std::make_shared<volt::optim::SequentialLR>(
        *optimizer, std::vector<std::shared_ptr<volt::optim::Scheduler>>{
                        warmup, std::make_shared<volt::optim::CosineAnnealingLR>(*optimizer, 8, 0.001)},
        std::vector<std::int64_t>{4});
    return {optimizer, schedule, volt::SchedulerInterval::step};
  }
};

}  // namespace

TEST_CASE("volt::optim schedulers step with the Trainer and resume exactly from a mid-epoch checkpoint") {
  volt_test::TempDir dir;
  auto data = volt_test::make_batches(5);
  auto fit = [&](const std::filesystem::path& resume_from, const std::filesystem::path& save_dir) {
    torch::manual_seed(7);
    auto model = std::make_shared<ScheduledRegressor>();
    auto options = volt_test::quiet_options(dir);
    options.max_epochs = 3;
    options.enable_checkpointing = true;
    volt::Trainer<volt::CPU> trainer(
        options, volt::ModelCheckpoint{{.dirpath = save_dir, .save_top_k = -1, .every_n_train_steps = 7}});
    trainer.fit(model, data, resume_from);
    return model;
  };
  auto straight = fit({}, dir.path / "a");
  // 15 steps: the warm-up's 4 then the cosine's 11 (periodic after 8).
  CHECK(lr_of(*straight->optimizer) == doctest::Approx(0.001 + 0.099 * (1 + std::cos(std::numbers::pi * 11 / 8)) / 2));
  REQUIRE(std::filesystem::exists(dir.path / "a" / "epoch=1-step=7.ckpt"));
  auto resumed = fit(dir.path / "a" / "epoch=1-step=7.ckpt", dir.path / "b");
  CHECK(lr_of(*resumed->optimizer) == lr_of(*straight->optimizer));
  for (std::size_t i = 0; i < straight->parameters().size(); ++i) {
    CHECK(torch::equal(straight->parameters()[i], resumed->parameters()[i]));
  }
}

TEST_CASE("ReduceLROnPlateau drops the rate after patience steps without improvement, then cools down") {
  torch::optim::SGD sgd({parameter()}, torch::optim::SGDOptions(1.0));
  volt::optim::ReduceLROnPlateau scheduler(sgd, {.factor = 0.5, .patience = 1, .cooldown = 1});
  // PyTorch 2.11 with the same metrics gives 1, 1, 1, 0.5, 0.5, 0.5, 0.25.
  const std::vector<double> metrics{3.0, 2.0, 2.5, 2.5, 2.5, 2.5, 2.5};
  const std::vector<double> expected{1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.25};
  for (std::size_t i = 0; i < metrics.size(); ++i) {
    scheduler.step(metrics[i]);
    CHECK(lr_of(sgd) == doctest::Approx(expected[i]));
  }
  CHECK(scheduler.best() == 2.0);
  // step() without a metric does not compile on the ReduceLROnPlateau (step(double) hides it); through the
  // LRScheduler base, as a scheduler list would call it, it throws.
  CHECK_THROWS_AS(static_cast<torch::optim::LRScheduler&>(scheduler).step(), std::logic_error);
  CHECK_THROWS_WITH_AS(volt::optim::ReduceLROnPlateau(sgd, {.factor = 1.0}), "Factor should be < 1.0.", std::invalid_argument);
}

namespace {

struct PlateauModel : volt_test::Regressor {
  std::shared_ptr<torch::optim::SGD> optimizer;
  std::string monitor = "val_loss";
  bool strict = true;
  bool in_dict = true;
  volt::OptimizerConfig configure_optimizers() {
    optimizer = std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(0.1));
    auto plateau = std::make_shared<volt::optim::ReduceLROnPlateau>(
        *optimizer, volt::optim::ReduceLROnPlateauOptions{.mode = "max", .factor = 0.5, .patience = 0});
    volt::OptimizerConfig config{optimizer};
    if (in_dict) {
      volt::LRSchedulerConfig scheduler{plateau};
      scheduler.monitor = monitor;
      scheduler.strict = strict;
      config.lr_schedulers.push_back(scheduler);
    } else {
      config.lr_scheduler = plateau;
      config.monitor = monitor;
    }
    return config;
  }
};

}  // namespace

TEST_CASE("ReduceLROnPlateau with the Trainer: steps with the monitored metric, Lightning's refusals, exact resume") {
  volt_test::TempDir dir;
  auto options = volt_test::quiet_options(dir);
  options.max_epochs = 3;
  options.num_sanity_val_steps = 0;
  {
    // mode max, patience 0: the validation loss of a learning regressor falls, so each epoch "gets worse".
    auto model = std::make_shared<PlateauModel>();
    volt::Trainer<volt::CPU> trainer(options);
    trainer.fit(model, volt_test::make_batches(3), volt_test::make_batches(2));
    CHECK(lr_of(*model->optimizer) == doctest::Approx(0.1 * 0.5 * 0.5));
  }
  {
    auto model = std::make_shared<PlateauModel>();
    model->monitor = "";
    volt::Trainer<volt::CPU> trainer(options);
    CHECK_THROWS_WITH_AS(trainer.fit(model, volt_test::make_batches(3)),
                         "The lr scheduler dict must include a monitor when a `ReduceLROnPlateau` scheduler is used. "
                         "For example: {\"optimizer\": optimizer, \"lr_scheduler\": {\"scheduler\": scheduler, "
                         "\"monitor\": \"your_loss\"}}",
                         volt::MisconfigurationError);
    model->in_dict = false;
    CHECK_THROWS_WITH_AS(trainer.fit(model, volt_test::make_batches(3)),
                         doctest::Contains("`configure_optimizers` must include a monitor when a `ReduceLROnPlateau`"),
                         volt::MisconfigurationError);
  }
  {
    auto model = std::make_shared<PlateauModel>();
    model->monitor = "missing";
    volt::Trainer<volt::CPU> trainer(options);
    CHECK_THROWS_WITH_AS(trainer.fit(model, volt_test::make_batches(3), volt_test::make_batches(2)),
                         doctest::Contains("ReduceLROnPlateau conditioned on metric missing which is not available. "
                                           "Available metrics are: ['val_loss']. Condition can be set using `monitor` "
                                           "key in lr scheduler dict"),
                         volt::MisconfigurationError);
    model->strict = false;
    volt::Trainer<volt::CPU> lenient(options);
    lenient.fit(model, volt_test::make_batches(3), volt_test::make_batches(2));
    CHECK(lr_of(*model->optimizer) == 0.1);
  }
  {
    auto run = [&](const std::filesystem::path& resume_from, const std::filesystem::path& save_dir) {
      torch::manual_seed(11);
      auto model = std::make_shared<PlateauModel>();
      auto resume_options = options;
      resume_options.max_epochs = 4;
      resume_options.enable_checkpointing = true;
      volt::Trainer<volt::CPU> trainer(
          resume_options, volt::ModelCheckpoint{{.dirpath = save_dir, .save_top_k = -1, .every_n_train_steps = 4}});
      trainer.fit(model, volt_test::make_batches(3), volt_test::make_batches(2), resume_from);
      return model;
    };
    auto straight = run({}, dir.path / "a");
    REQUIRE(std::filesystem::exists(dir.path / "a" / "epoch=2-step=8.ckpt"));  // mid-epoch: batch 2 of epoch 2
    auto resumed = run(dir.path / "a" / "epoch=2-step=8.ckpt", dir.path / "b");
    CHECK(lr_of(*resumed->optimizer) == lr_of(*straight->optimizer));
    CHECK(lr_of(*straight->optimizer) == doctest::Approx(0.1 * std::pow(0.5, 3)));
    for (std::size_t i = 0; i < straight->parameters().size(); ++i) {
      CHECK(torch::equal(straight->parameters()[i], resumed->parameters()[i]));
    }
  }
}

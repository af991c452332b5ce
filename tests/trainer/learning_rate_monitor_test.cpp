// volt::LearningRateMonitor in the Trainer (Lightning's callbacks/lr_monitor.py). Every expected row (step and
// values) was recorded with Lightning 2.6.6 on the same schedules: LambdaLR with the same factors, 4 batches per
// epoch unless said otherwise, log_every_n_steps as given.
#include <torch/torch.h>

#include <doctest/doctest.h>

#include <volt/volt.hpp>

#include "test_common.hpp"
#include "trainer/trainer_fixtures.hpp"

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

using volt_test::quiet_options;
using volt_test::TempDir;

namespace {

using Row = std::pair<std::int64_t, std::map<std::string, double>>;
using Rows = std::vector<Row>;

/// Keeps the rows LearningRateMonitor writes (the Trainer's own rows carry none of its keys).
struct LrLogger : volt::Logger {
  Rows rows;
  void log_metrics(const std::map<std::string, double>& metrics, std::int64_t step) override {
    std::map<std::string, double> kept;
    for (const auto& [key, value] : metrics) {
      if (key.rfind("lr-", 0) == 0 || key.rfind("my_lr", 0) == 0 || key.rfind("custom", 0) == 0 ||
          key.rfind("rate/", 0) == 0) kept[key] = value;
    }
    if (!kept.empty()) rows.emplace_back(step, std::move(kept));
  }
  void log_hyperparams(const std::map<std::string, std::string>&) override {}
  std::filesystem::path log_dir() const override { return "."; }
};

void check_rows(const Rows& actual, const Rows& expected) {
  REQUIRE(actual.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    CAPTURE(i);
    CHECK(actual[i].first == expected[i].first);
    REQUIRE(actual[i].second.size() == expected[i].second.size());
    for (const auto& [key, value] : expected[i].second) {
      CAPTURE(key);
      REQUIRE(actual[i].second.count(key) == 1);
      CHECK(actual[i].second.at(key) == doctest::Approx(value).epsilon(1e-12));
    }
  }
}

double factor(double base, std::int64_t k) { return std::pow(base, static_cast<double>(k)); }

/// One Linear layer and one optimizer with a LambdaLR (`lr * 0.5^k`), stepped per epoch or per batch.
struct OneScheduler : torch::nn::Module {
  torch::nn::Linear linear{torch::nn::Linear(2, 1)};
  bool adam = false;
  volt::SchedulerInterval interval = volt::SchedulerInterval::epoch;
  std::string name{};
  OneScheduler() { register_module("linear", linear); }
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t) {
    return torch::mse_loss(linear->forward(batch.data), batch.target);
  }
  volt::OptimizerConfig configure_optimizers() {
    std::shared_ptr<torch::optim::Optimizer> optimizer;
    if (adam) {
      optimizer = std::make_shared<torch::optim::Adam>(parameters(), torch::optim::AdamOptions(0.01));
    } else {
      optimizer = std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(0.1));
    }
    volt::OptimizerConfig config{optimizer};
    auto scheduler = std::make_shared<volt::optim::LambdaLR>(*optimizer, [](std::int64_t k) { return factor(0.5, k); });
    config.lr_schedulers.push_back({scheduler, interval, 1, name});
    return config;
  }
};

struct Run {
  Rows rows;
  std::map<std::string, double, std::less<>> callback_metrics;
  std::map<std::string, std::vector<double>> lrs;  // LearningRateMonitor::lrs() after the fit
};

template <class Model>
Run fit(std::shared_ptr<Model> model, volt::LearningRateMonitorOptions monitor, std::int64_t epochs,
        std::int64_t log_every_n_steps = 1, int batches = 4) {
  TempDir dir;
  auto logger = std::make_shared<LrLogger>();
  auto options = quiet_options(dir);
  options.max_epochs = epochs;
  options.log_every_n_steps = log_every_n_steps;
  options.logger = true;
  volt::Trainer<volt::CPU> trainer(options, logger, volt::LearningRateMonitor(std::move(monitor)));
  trainer.fit(model, volt_test::make_batches(batches));
  return {logger->rows, trainer.callback_metrics(), trainer.callback<volt::LearningRateMonitor>()->lrs()};
}

/// Manual optimization over two Linear layers: two SGD (lr 0.1 and 0.2, the first with a step-interval LambdaLR
/// the model steps after each batch) or two Adam without schedulers (lr 0.01 and 0.02).
struct MonitoredTwoOptimizers : torch::nn::Module {
  static constexpr bool automatic_optimization = false;
  torch::nn::Linear a{torch::nn::Linear(2, 1)};
  torch::nn::Linear b{torch::nn::Linear(2, 1)};
  bool adam = false;
  MonitoredTwoOptimizers() {
    register_module("a", a);
    register_module("b", b);
  }
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t, volt::StepContext& ctx) {
    torch::Tensor loss;
    for (std::size_t i = 0; i < 2; ++i) {
      auto& optimizer = ctx.optimizers()[i];
      loss = torch::mse_loss((i == 0 ? a : b)->forward(batch.data), batch.target);
      optimizer.zero_grad();
      ctx.manual_backward(loss);
      optimizer.step();
    }
    for (auto& scheduler : ctx.lr_schedulers()) scheduler.step();
    return loss;
  }
  std::vector<volt::OptimizerConfig> configure_optimizers() {
    if (adam) {
      return {{std::make_shared<torch::optim::Adam>(a->parameters(), torch::optim::AdamOptions(0.01))},
              {std::make_shared<torch::optim::Adam>(b->parameters(), torch::optim::AdamOptions(0.02))}};
    }
    auto first = std::make_shared<torch::optim::SGD>(a->parameters(), torch::optim::SGDOptions(0.1));
    auto second = std::make_shared<torch::optim::SGD>(b->parameters(), torch::optim::SGDOptions(0.2));
    volt::OptimizerConfig config{first};
    config.lr_schedulers.push_back(
        {std::make_shared<volt::optim::LambdaLR>(*first, [](std::int64_t k) { return factor(0.5, k); }),
         volt::SchedulerInterval::step});
    return {std::move(config), {second}};
  }
};

/// Manual optimization over three SGD (lr 0.1, 0.2, 0.3) with constant epoch-interval schedulers, named as asked
/// (a null name: that optimizer has no scheduler).
struct ThreeSGD : torch::nn::Module {
  static constexpr bool automatic_optimization = false;
  std::vector<torch::nn::Linear> layers{torch::nn::Linear(2, 1), torch::nn::Linear(2, 1), torch::nn::Linear(2, 1)};
  std::vector<const char*> names;
  explicit ThreeSGD(std::vector<const char*> scheduler_names) : names(std::move(scheduler_names)) {
    for (std::size_t i = 0; i < layers.size(); ++i) register_module("l" + std::to_string(i), layers[i]);
  }
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t, volt::StepContext& ctx) {
    torch::Tensor loss;
    for (std::size_t i = 0; i < layers.size(); ++i) {
      loss = torch::mse_loss(layers[i]->forward(batch.data), batch.target);
      ctx.optimizers()[i].zero_grad();
      ctx.manual_backward(loss);
      ctx.optimizers()[i].step();
    }
    return loss;
  }
  std::vector<volt::OptimizerConfig> configure_optimizers() {
    std::vector<volt::OptimizerConfig> configs;
    for (std::size_t i = 0; i < layers.size(); ++i) {
      auto optimizer = std::make_shared<torch::optim::SGD>(layers[i]->parameters(),
                                                           torch::optim::SGDOptions(0.1 * static_cast<double>(i + 1)));
      volt::OptimizerConfig config{optimizer};
      if (names[i] != nullptr) {
        auto constant = std::make_shared<volt::optim::LambdaLR>(*optimizer, [](std::int64_t) { return 1.0; });
        config.lr_schedulers.push_back({constant, volt::SchedulerInterval::epoch, 1, names[i]});
      }
      configs.push_back(std::move(config));
    }
    return configs;
  }
};

}  // namespace

TEST_CASE("LearningRateMonitor: SGD with an epoch-interval scheduler") {
  SUBCASE("logging_interval None and epoch log at each epoch start, at the batches stepped so far") {
    for (const char* interval : {"", "epoch"}) {
      CAPTURE(interval);
      const auto run = fit(std::make_shared<OneScheduler>(), {.logging_interval = interval}, 3);
      // Lightning 2.6.6: [(0, 0.1), (4, 0.05), (8, 0.025)].
      check_rows(run.rows, {{0, {{"lr-SGD", 0.1}}}, {4, {{"lr-SGD", 0.05}}}, {8, {{"lr-SGD", 0.025}}}});
      // Lightning puts the last values into trainer.callback_metrics.
      REQUIRE(run.callback_metrics.count("lr-SGD") == 1);
      CHECK(run.callback_metrics.at("lr-SGD") == doctest::Approx(0.025));
    }
  }
  SUBCASE("logging_interval step logs before every training batch whose step is logged") {
    const auto run = fit(std::make_shared<OneScheduler>(), {.logging_interval = "step"}, 2);
    Rows expected;
    for (std::int64_t step = 0; step < 8; ++step) expected.push_back({step, {{"lr-SGD", step < 4 ? 0.1 : 0.05}}});
    check_rows(run.rows, expected);
  }
}

TEST_CASE("LearningRateMonitor: Adam with a step-interval scheduler follows log_every_n_steps") {
  auto model = [] {
    auto m = std::make_shared<OneScheduler>();
    m->adam = true;
    m->interval = volt::SchedulerInterval::step;
    return m;
  };
  SUBCASE("logging_interval None, log_every_n_steps 2: batches 1, 3, 5, 7") {
    const auto run = fit(model(), {}, 2, 2);
    check_rows(run.rows, {{1, {{"lr-Adam", 0.005}}},
                          {3, {{"lr-Adam", 0.00125}}},
                          {5, {{"lr-Adam", 0.0003125}}},
                          {7, {{"lr-Adam", 7.8125e-05}}}});
    CHECK(run.callback_metrics.at("lr-Adam") == doctest::Approx(7.8125e-05));
  }
  SUBCASE("logging_interval step, log_every_n_steps 3: batches 2 and 5") {
    const auto run = fit(model(), {.logging_interval = "step"}, 2, 3);
    check_rows(run.rows, {{2, {{"lr-Adam", 0.0025}}}, {5, {{"lr-Adam", 0.0003125}}}});
  }
  SUBCASE("logging_interval epoch logs a step scheduler at epoch starts only") {
    const auto run = fit(model(), {.logging_interval = "epoch"}, 2);
    check_rows(run.rows, {{0, {{"lr-Adam", 0.01}}}, {4, {{"lr-Adam", 0.000625}}}});
  }
}

namespace {
/// One SGD (lr 0.1) with a step-interval LambdaLR (0.5^k) and an epoch-interval one (0.1^k), both unnamed.
struct MixedSchedulers : OneScheduler {
  volt::OptimizerConfig configure_optimizers() {
    auto optimizer = std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(0.1));
    volt::OptimizerConfig config{optimizer};
    config.lr_schedulers.push_back(
        {std::make_shared<volt::optim::LambdaLR>(*optimizer, [](std::int64_t k) { return factor(0.5, k); }),
         volt::SchedulerInterval::step});
    config.lr_schedulers.push_back(
        {std::make_shared<volt::optim::LambdaLR>(*optimizer, [](std::int64_t k) { return factor(0.1, k); }),
         volt::SchedulerInterval::epoch});
    return config;
  }
};
}  // namespace

TEST_CASE("LearningRateMonitor: logging_interval None logs each scheduler at its own interval") {
  const auto run = fit(std::make_shared<MixedSchedulers>(), {}, 2);
  // Two unnamed schedulers over one SGD: "lr-SGD" (step, before each batch) and "lr-SGD-1" (epoch, at each
  // epoch start, before that step's batch row). Both read the same optimizer's rate.
  check_rows(run.rows, {{0, {{"lr-SGD-1", 0.1}}},
                        {0, {{"lr-SGD", 0.1}}},
                        {1, {{"lr-SGD", 0.05}}},
                        {2, {{"lr-SGD", 0.025}}},
                        {3, {{"lr-SGD", 0.0125}}},
                        {4, {{"lr-SGD-1", 0.01}}},
                        {4, {{"lr-SGD", 0.01}}},
                        {5, {{"lr-SGD", 0.003125}}},
                        {6, {{"lr-SGD", 0.0015625}}},
                        {7, {{"lr-SGD", 0.00078125}}}});
  CHECK(run.callback_metrics.at("lr-SGD") == doctest::Approx(0.00078125));
  CHECK(run.callback_metrics.at("lr-SGD-1") == doctest::Approx(0.01));
  // Lightning 2.6.6's lr_monitor.lrs: every rate written, per key.
  REQUIRE(run.lrs.size() == 2);
  const std::vector<double> step{0.1, 0.05, 0.025, 0.0125, 0.01, 0.003125, 0.0015625, 0.00078125};
  REQUIRE(run.lrs.at("lr-SGD").size() == step.size());
  for (std::size_t i = 0; i < step.size(); ++i) CHECK(run.lrs.at("lr-SGD")[i] == doctest::Approx(step[i]));
  REQUIRE(run.lrs.at("lr-SGD-1").size() == 2);
  CHECK(run.lrs.at("lr-SGD-1")[0] == doctest::Approx(0.1));
  CHECK(run.lrs.at("lr-SGD-1")[1] == doctest::Approx(0.01));
}

TEST_CASE("LearningRateMonitor: two optimizers of one class under manual optimization") {
  SUBCASE("the one without a scheduler is logged at epoch starts and before batches") {
    // Two batches per epoch; the first SGD's step scheduler is stepped by the model after each batch.
    const auto run = fit(std::make_shared<MonitoredTwoOptimizers>(), {}, 2, 1, 2);
    check_rows(run.rows, {{0, {{"lr-SGD-1", 0.2}}},
                          {0, {{"lr-SGD", 0.1}, {"lr-SGD-1", 0.2}}},
                          {1, {{"lr-SGD", 0.05}, {"lr-SGD-1", 0.2}}},
                          {2, {{"lr-SGD-1", 0.2}}},
                          {2, {{"lr-SGD", 0.025}, {"lr-SGD-1", 0.2}}},
                          {3, {{"lr-SGD", 0.0125}, {"lr-SGD-1", 0.2}}}});
  }
  SUBCASE("two Adam without schedulers: lr-Adam and lr-Adam-1") {
    auto model = std::make_shared<MonitoredTwoOptimizers>();
    model->adam = true;
    const auto run = fit(model, {}, 2, 1, 2);
    const std::map<std::string, double> both{{"lr-Adam", 0.01}, {"lr-Adam-1", 0.02}};
    check_rows(run.rows, {{0, both}, {0, both}, {1, both}, {2, both}, {2, both}, {3, both}});
  }
}

namespace {
/// One SGD (lr 0.1) with two param groups (the second at lr 0.01) and an epoch-interval LambdaLR (0.5^k).
struct ParamGroups : torch::nn::Module {
  torch::nn::Linear a{torch::nn::Linear(2, 1)};
  torch::nn::Linear b{torch::nn::Linear(2, 1)};
  ParamGroups() {
    register_module("a", a);
    register_module("b", b);
  }
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t) {
    return torch::mse_loss(a->forward(batch.data) + b->forward(batch.data), batch.target);
  }
  volt::OptimizerConfig configure_optimizers() {
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(a->parameters());
    groups.emplace_back(b->parameters(), std::make_unique<torch::optim::SGDOptions>(0.01));
    auto optimizer = std::make_shared<torch::optim::SGD>(groups, torch::optim::SGDOptions(0.1));
    return {optimizer,
            std::make_shared<volt::optim::LambdaLR>(*optimizer, [](std::int64_t k) { return factor(0.5, k); })};
  }
};
}  // namespace

TEST_CASE("LearningRateMonitor: several param groups are logged as /pg1, /pg2") {
  const auto run = fit(std::make_shared<ParamGroups>(), {}, 2);
  check_rows(run.rows, {{0, {{"lr-SGD/pg1", 0.1}, {"lr-SGD/pg2", 0.01}}},
                        {4, {{"lr-SGD/pg1", 0.05}, {"lr-SGD/pg2", 0.005}}}});
  CHECK(run.callback_metrics.at("lr-SGD/pg2") == doctest::Approx(0.005));
  CHECK(run.lrs.at("lr-SGD/pg1") == std::vector<double>{0.1, 0.05});
  CHECK(run.lrs.at("lr-SGD/pg2").size() == 2);
}

TEST_CASE("LearningRateMonitor: a scheduler's name replaces the key") {
  SUBCASE("a named step-interval scheduler") {
    auto model = std::make_shared<OneScheduler>();
    model->adam = true;
    model->interval = volt::SchedulerInterval::step;
    model->name = "my_lr";
    const auto run = fit(model, {}, 1, 2);
    check_rows(run.rows, {{1, {{"my_lr", 0.005}}}, {3, {{"my_lr", 0.00125}}}});
  }
  SUBCASE("a named scheduler after two unnamed ones of its class gets their -N suffix") {
    // Lightning counts only the unnamed ones per class, but adds the suffix to every later name of that class.
    const auto run = fit(std::make_shared<ThreeSGD>(std::vector<const char*>{"", "", "custom"}), {}, 1, 1, 1);
    check_rows(run.rows, {{0, {{"lr-SGD", 0.1}, {"lr-SGD-1", 0.2}, {"custom-1", 0.3}}}});
  }
  SUBCASE("log_key_prefix replaces \"lr-\" in the keys built from class names, not in a scheduler's name") {
    const auto run = fit(std::make_shared<ThreeSGD>(std::vector<const char*>{"", "", "custom"}),
                         {.log_key_prefix = "rate/"}, 1, 1, 1);
    check_rows(run.rows, {{0, {{"rate/SGD", 0.1}, {"rate/SGD-1", 0.2}, {"custom-1", 0.3}}}});
  }
  SUBCASE("a named first scheduler leaves the counting to the unnamed ones") {
    // The third optimizer has no scheduler: logged at the epoch start and before the batch.
    const auto run = fit(std::make_shared<ThreeSGD>(std::vector<const char*>{"custom", "", nullptr}), {}, 1, 1, 1);
    check_rows(run.rows, {{0, {{"custom", 0.1}, {"lr-SGD", 0.2}, {"lr-SGD-1", 0.3}}}, {0, {{"lr-SGD-1", 0.3}}}});
  }
}

namespace {
/// Manual optimization over two Linear layers with the optimizers `kind` names and no schedulers (or, for
/// "adamw_sched", one AdamW with a named epoch-interval scheduler).
struct MomentumModel : torch::nn::Module {
  static constexpr bool automatic_optimization = false;
  torch::nn::Linear a{torch::nn::Linear(2, 1)};
  torch::nn::Linear b{torch::nn::Linear(2, 1)};
  std::string kind;
  explicit MomentumModel(std::string which) : kind(std::move(which)) {
    register_module("a", a);
    register_module("b", b);
  }
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t, volt::StepContext& ctx) {
    auto loss = torch::mse_loss(a->forward(batch.data) + b->forward(batch.data), batch.target);
    for (auto& optimizer : ctx.optimizers()) optimizer.zero_grad();
    ctx.manual_backward(loss);
    for (auto& optimizer : ctx.optimizers()) optimizer.step();
    return loss;
  }
  std::vector<volt::OptimizerConfig> configure_optimizers() {
    using namespace torch::optim;
    if (kind == "sgd_adam") {
      return {{std::make_shared<SGD>(a->parameters(), SGDOptions(0.1).momentum(0.9).weight_decay(1e-4))},
              {std::make_shared<Adam>(b->parameters(), AdamOptions(0.01).betas({0.8, 0.99}).weight_decay(0.01))}};
    }
    if (kind == "adagrad") return {{std::make_shared<Adagrad>(parameters(), AdagradOptions(0.1))}};
    if (kind == "rmsprop_groups") {
      std::vector<OptimizerParamGroup> groups;
      groups.emplace_back(a->parameters(), std::make_unique<RMSpropOptions>(RMSpropOptions(0.01).momentum(0.5)));
      groups.emplace_back(b->parameters(), std::make_unique<RMSpropOptions>(RMSpropOptions(0.01).weight_decay(0.2)));
      return {{std::make_shared<RMSprop>(groups, RMSpropOptions(0.01))}};
    }
    if (kind == "adamw_sched") {
      auto optimizer = std::make_shared<AdamW>(parameters(), AdamWOptions(0.01).betas({0.7, 0.9}));
      volt::OptimizerConfig config{optimizer};
      config.lr_schedulers.push_back(
          {std::make_shared<volt::optim::LambdaLR>(*optimizer, [](std::int64_t k) { return factor(0.5, k); }),
           volt::SchedulerInterval::epoch, 1, "my_lr"});
      return {std::move(config)};
    }
    return {{std::make_shared<SGD>(parameters(), SGDOptions(0.1))}};
  }
};

constexpr const char* momentum_warning =
    "You have set log_momentum=True, but some optimizers do not have momentum. This will log a value 0 for the "
    "momentum.";
}  // namespace

TEST_CASE("LearningRateMonitor: log_momentum and log_weight_decay") {
  const volt::LearningRateMonitorOptions both{.log_momentum = true, .log_weight_decay = true};
  SUBCASE("SGD momentum and Adam betas[0]; an SGD with an Adam also warns, as Lightning does") {
    volt_test::CaptureLog log;
    const auto run = fit(std::make_shared<MomentumModel>("sgd_adam"), both, 1, 1, 1);
    const std::map<std::string, double> row{{"lr-SGD", 0.1},           {"lr-SGD-momentum", 0.9},
                                            {"lr-SGD-weight_decay", 1e-4}, {"lr-Adam", 0.01},
                                            {"lr-Adam-momentum", 0.8}, {"lr-Adam-weight_decay", 0.01}};
    check_rows(run.rows, {{0, row}, {0, row}});
    CHECK(log.warned(momentum_warning));
    CHECK(run.callback_metrics.at("lr-Adam-momentum") == doctest::Approx(0.8));
  }
  SUBCASE("Adagrad has no momentum: 0 and a warning, once") {
    volt_test::CaptureLog log;
    const auto run = fit(std::make_shared<MomentumModel>("adagrad"), both, 1, 1, 1);
    const std::map<std::string, double> row{
        {"lr-Adagrad", 0.1}, {"lr-Adagrad-momentum", 0.0}, {"lr-Adagrad-weight_decay", 0.0}};
    check_rows(run.rows, {{0, row}, {0, row}});
    CHECK(log.warned(momentum_warning));
    fit(std::make_shared<MomentumModel>("adagrad"), both, 1, 1, 1);
    std::size_t count = 0;
    for (const auto& line : log.warnings) count += line.find(momentum_warning) != std::string::npos ? 1 : 0;
    CHECK(count == 1);
  }
  SUBCASE("Adagrad without log_momentum: no momentum key, no warning") {
    volt_test::CaptureLog log;
    const auto run = fit(std::make_shared<MomentumModel>("adagrad"), {.log_weight_decay = true}, 1, 1, 1);
    const std::map<std::string, double> row{{"lr-Adagrad", 0.1}, {"lr-Adagrad-weight_decay", 0.0}};
    check_rows(run.rows, {{0, row}, {0, row}});
    CHECK_FALSE(log.warned(momentum_warning));
  }
  SUBCASE("param groups: /pg1-momentum, /pg2-weight_decay") {
    volt_test::CaptureLog log;
    const auto run = fit(std::make_shared<MomentumModel>("rmsprop_groups"), both, 1, 1, 1);
    const std::map<std::string, double> row{{"lr-RMSprop/pg1", 0.01},         {"lr-RMSprop/pg1-momentum", 0.5},
                                            {"lr-RMSprop/pg1-weight_decay", 0.0}, {"lr-RMSprop/pg2", 0.01},
                                            {"lr-RMSprop/pg2-momentum", 0.0},   {"lr-RMSprop/pg2-weight_decay", 0.2}};
    check_rows(run.rows, {{0, row}, {0, row}});
    CHECK_FALSE(log.warned(momentum_warning));
  }
  SUBCASE("a named scheduler: <name>-momentum, <name>-weight_decay (AdamW's default 0.01)") {
    volt_test::CaptureLog log;
    const auto run = fit(std::make_shared<MomentumModel>("adamw_sched"), both, 1, 1, 1);
    check_rows(run.rows, {{0, {{"my_lr", 0.01}, {"my_lr-momentum", 0.7}, {"my_lr-weight_decay", 0.01}}}});
    CHECK_FALSE(log.warned(momentum_warning));
  }
  SUBCASE("SGD without momentum logs 0 without a warning (it has the option)") {
    volt_test::CaptureLog log;
    const auto run = fit(std::make_shared<MomentumModel>("sgd"), both, 1, 1, 1);
    const std::map<std::string, double> row{{"lr-SGD", 0.1}, {"lr-SGD-momentum", 0.0}, {"lr-SGD-weight_decay", 0.0}};
    check_rows(run.rows, {{0, row}, {0, row}});
    CHECK_FALSE(log.warned(momentum_warning));
  }
}

TEST_CASE("LearningRateMonitor: a Trainer without a logger is refused at train start") {
  TempDir dir;
  auto options = quiet_options(dir);
  volt::Trainer<volt::CPU> trainer(options, volt::LearningRateMonitor());
  auto model = std::make_shared<OneScheduler>();
  CHECK_THROWS_WITH_AS(trainer.fit(model, volt_test::make_batches(2)),
                       "Cannot use `LearningRateMonitor` callback with `Trainer` that has no logger.",
                       volt::MisconfigurationError);
}

TEST_CASE("LearningRateMonitor: logging_interval must be step, epoch or empty") {
  CHECK_THROWS_WITH_AS(volt::LearningRateMonitor({.logging_interval = "batch"}),
                       "logging_interval should be `step` or `epoch` or `None`.", volt::MisconfigurationError);
  CHECK_NOTHROW(volt::LearningRateMonitor({.logging_interval = "step"}));
  CHECK_NOTHROW(volt::LearningRateMonitor({.logging_interval = "epoch"}));
  CHECK_NOTHROW(volt::LearningRateMonitor(volt::LearningRateMonitorOptions{}));
}

namespace {
/// Asks to stop after the second optimizer step (min_epochs keeps the fit going, with should_stop set).
struct StopAtStep2 {
  void on_train_batch_end(volt::TrainerState& state, const torch::Tensor&, std::int64_t) {
    if (state.global_step == 2) state.should_stop = true;
  }
};
}  // namespace

TEST_CASE("LearningRateMonitor: a requested stop logs every batch until the fit ends") {
  // Lightning's should_update_logs is also true while trainer.should_stop is set: log_every_n_steps=50 would log
  // nothing in 8 batches, but min_epochs=2 keeps training after the stop request at step 2.
  TempDir dir;
  auto logger = std::make_shared<LrLogger>();
  auto options = quiet_options(dir);
  options.max_epochs = 5;
  options.min_epochs = 2;
  options.log_every_n_steps = 50;
  options.logger = true;
  auto model = std::make_shared<OneScheduler>();
  model->interval = volt::SchedulerInterval::step;
  volt::Trainer<volt::CPU> trainer(options, logger, volt::LearningRateMonitor(), StopAtStep2{});
  trainer.fit(model, volt_test::make_batches(4));
  // Lightning 2.6.6: rows at steps 2..7 with 0.1 * 0.5^step; the fit ends at global_step 8.
  Rows expected;
  for (std::int64_t step = 2; step < 8; ++step) expected.push_back({step, {{"lr-SGD", 0.1 * factor(0.5, step)}}});
  check_rows(logger->rows, expected);
  CHECK(trainer.global_step() == 8);
}

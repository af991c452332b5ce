// The loop checked against Lightning 2.6.6: model hooks in Lightning's order, values logged in epoch-level hooks,
// val_check_interval refused without validation data, numbers in messages as Python prints them.
// The expected values were recorded by running Lightning 2.6.6 (CPU, torch 2.11) with tests/oracle/record_loop_mends.py.
#include <torch/torch.h>

#include <doctest/doctest.h>

#include "test_common.hpp"
#include "trainer/trainer_fixtures.hpp"

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

using volt_test::quiet_options;
using volt_test::TempDir;

namespace {

using Events = std::shared_ptr<std::vector<std::string>>;

// A model that records every model-side hook Lightning calls, each in one of the forms volt accepts
// (arguments then ctx, arguments only, ctx only, nothing).
struct MendsModel : volt_test::Regressor {
  Events events = std::make_shared<std::vector<std::string>>();
  torch::optim::Optimizer* seen_optimizer = nullptr;
  std::shared_ptr<torch::optim::SGD> optimizer;
  std::vector<std::int64_t> batch_indices;
  std::vector<double> losses_seen;
  void add(const std::string& name) { events->push_back("model." + name); }

  std::shared_ptr<torch::optim::SGD> configure_optimizers() {
    optimizer = std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(0.1));
    return optimizer;
  }
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t) {
    add("training_step");
    return torch::mse_loss(forward(batch.data), batch.target);
  }
  void validation_step(const torch::data::Example<>&, std::int64_t) { add("validation_step"); }

  void on_fit_start() { add("on_fit_start"); }
  void on_train_start(volt::StepContext&) { add("on_train_start"); }
  void on_train_epoch_start() { add("on_train_epoch_start"); }
  void on_train_batch_start(const torch::data::Example<>& batch, std::int64_t batch_idx, volt::StepContext&) {
    CHECK(batch.data.size(0) == 4);
    batch_indices.push_back(batch_idx);
    add("on_train_batch_start");
  }
  void on_before_zero_grad(torch::optim::Optimizer& opt) {
    CHECK(&opt == optimizer.get());
    add("on_before_zero_grad");
  }
  void on_before_backward(const torch::Tensor& loss) {
    CHECK(loss.requires_grad());
    add("on_before_backward");
  }
  void on_after_backward(volt::StepContext&) { add("on_after_backward"); }
  void on_before_optimizer_step(torch::optim::Optimizer& opt) {
    seen_optimizer = &opt;
    // Gradients exist and the step has not run yet.
    CHECK(parameters()[0].grad().defined());
    add("on_before_optimizer_step");
  }
  void on_train_batch_end(const torch::Tensor& loss, const torch::data::Example<>&, std::int64_t) {
    losses_seen.push_back(loss.item<double>());
    add("on_train_batch_end");
  }
  void on_validation_epoch_start() { add("on_validation_epoch_start"); }
  void on_validation_batch_start(const torch::data::Example<>&, std::int64_t) { add("on_validation_batch_start"); }
  void on_validation_batch_end(volt::StepContext& ctx) {
    CHECK(ctx.stage() == volt::Stage::fitting);
    add("on_validation_batch_end");
  }
  void on_validation_epoch_end() { add("on_validation_epoch_end"); }
  void on_train_epoch_end() { add("on_train_epoch_end"); }
};

struct HookedCallback {
  Events events;
  void add(const std::string& name) { events->push_back("callback." + name); }
  void on_fit_start(volt::TrainerState&) { add("on_fit_start"); }
  void on_train_start(volt::TrainerState&) { add("on_train_start"); }
  void on_train_epoch_start(volt::TrainerState&) { add("on_train_epoch_start"); }
  void on_train_batch_start(volt::TrainerState&, std::int64_t) { add("on_train_batch_start"); }
  void on_before_zero_grad(volt::TrainerState&) { add("on_before_zero_grad"); }
  void on_before_backward(volt::TrainerState&, const torch::Tensor&) { add("on_before_backward"); }
  void on_after_backward(volt::TrainerState&) { add("on_after_backward"); }
  void on_before_optimizer_step(volt::TrainerState&, torch::optim::Optimizer&) { add("on_before_optimizer_step"); }
  void on_train_batch_end(volt::TrainerState&, const torch::Tensor&, std::int64_t) { add("on_train_batch_end"); }
  void on_validation_epoch_start(volt::TrainerState&) { add("on_validation_epoch_start"); }
  void on_validation_batch_start(volt::TrainerState&, std::int64_t) { add("on_validation_batch_start"); }
  void on_validation_batch_end(volt::TrainerState&, std::int64_t) { add("on_validation_batch_end"); }
  void on_validation_epoch_end(volt::TrainerState&) { add("on_validation_epoch_end"); }
  void on_train_epoch_end(volt::TrainerState&) { add("on_train_epoch_end"); }
};

// Every row the Trainer sends to a logger.
struct MendsLogger : volt::Logger {
  std::vector<std::pair<std::int64_t, std::map<std::string, double>>> rows;
  std::vector<std::map<std::string, std::string>> hparams;
  void log_metrics(const std::map<std::string, double>& metrics, std::int64_t step) override {
    rows.emplace_back(step, metrics);
  }
  void log_hyperparams(const std::map<std::string, std::string>& params) override { hparams.push_back(params); }
  std::filesystem::path log_dir() const override { return "."; }
};

}  // namespace

TEST_CASE("model hooks are called with the callbacks' hooks, in Lightning's order") {
  TempDir dir;
  auto model = std::make_shared<MendsModel>();
  auto options = quiet_options(dir);
  options.max_epochs = 1;
  options.limit_train_batches = std::int64_t{1};
  options.limit_val_batches = std::int64_t{1};
  options.num_sanity_val_steps = 0;
  volt::Trainer<volt::CPU> trainer(options, HookedCallback{model->events});
  trainer.fit(model, volt_test::make_batches(2), volt_test::make_batches(2));
  // Lightning 2.6.6, the same run (record_loop_mends.py, "ORDER").
  const std::vector<std::string> lightning{
      "callback.on_fit_start", "model.on_fit_start", "callback.on_train_start", "model.on_train_start",
      "callback.on_train_epoch_start", "model.on_train_epoch_start", "callback.on_train_batch_start",
      "model.on_train_batch_start", "model.training_step", "callback.on_before_zero_grad",
      "model.on_before_zero_grad", "callback.on_before_backward", "model.on_before_backward",
      "callback.on_after_backward", "model.on_after_backward", "callback.on_before_optimizer_step",
      "model.on_before_optimizer_step", "callback.on_train_batch_end", "model.on_train_batch_end",
      "callback.on_validation_epoch_start", "model.on_validation_epoch_start", "callback.on_validation_batch_start",
      "model.on_validation_batch_start", "model.validation_step", "callback.on_validation_batch_end",
      "model.on_validation_batch_end", "callback.on_validation_epoch_end", "model.on_validation_epoch_end",
      "callback.on_train_epoch_end", "model.on_train_epoch_end"};
  CHECK(*model->events == lightning);
  CHECK(model->seen_optimizer == model->optimizer.get());
  CHECK(model->batch_indices == std::vector<std::int64_t>{0});
  REQUIRE(model->losses_seen.size() == 1);
  CHECK(model->losses_seen[0] > 0.0);
}

TEST_CASE("model hooks run under gradient accumulation at Lightning's points") {
  TempDir dir;
  auto model = std::make_shared<MendsModel>();
  auto options = quiet_options(dir);
  options.accumulate_grad_batches = 2;
  volt::Trainer<volt::CPU> trainer(options);
  trainer.fit(model, volt_test::make_batches(3));
  std::map<std::string, int> counts;
  for (const auto& event : *model->events) ++counts[event];
  CHECK(counts["model.on_train_batch_start"] == 3);
  CHECK(counts["model.on_before_backward"] == 3);
  CHECK(counts["model.on_after_backward"] == 3);
  CHECK(counts["model.on_before_zero_grad"] == 2);       // the start of each window: batches 0 and 2
  CHECK(counts["model.on_before_optimizer_step"] == 2);  // the end of each window: batches 1 and 2 (the last)
  CHECK(model->batch_indices == std::vector<std::int64_t>{0, 1, 2});
}

namespace {

struct EpochEndLogger {
  void on_train_epoch_end(volt::TrainerState& state) {
    state.log("cb_train", static_cast<double>(state.current_epoch) * 10 + 1);
  }
  void on_validation_epoch_end(volt::TrainerState& state) {
    if (state.stage != volt::Stage::sanity_checking) state.log("cb_val", static_cast<double>(state.current_epoch) * 10 + 2);
  }
};

struct EpochEndModel : volt_test::Regressor {
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t, volt::StepContext& ctx) {
    auto loss = torch::mse_loss(forward(batch.data), batch.target);
    ctx.log("loss", loss);
    return loss;
  }
  void validation_step(const torch::data::Example<>&, std::int64_t, volt::StepContext& ctx) { ctx.log("v", 1.0); }
  void on_train_epoch_end(volt::StepContext& ctx) {
    ctx.log("model_train", static_cast<double>(ctx.current_epoch()) + 0.5);
  }
};

}  // namespace

TEST_CASE("values logged in on_train_epoch_end and on_validation_epoch_end land in that epoch's row") {
  TempDir dir;
  auto model = std::make_shared<EpochEndModel>();
  auto logger = std::make_shared<MendsLogger>();
  auto options = quiet_options(dir);
  options.logger = true;
  options.max_epochs = 2;
  options.log_every_n_steps = 1;
  options.num_sanity_val_steps = 2;
  volt::Trainer<volt::CPU> trainer(options, logger, EpochEndLogger{});
  trainer.fit(model, volt_test::make_batches(2), volt_test::make_batches(2));
  // Lightning 2.6.6, the same run with a CSVLogger (record_loop_mends.py, "CSV"): the rows without a step
  // value, as (step, epoch, names).
  //   step 1, epoch 0: cb_val=2.0, v=1.0     step 1, epoch 0: cb_train=1.0, model_train=0.5
  //   step 3, epoch 1: cb_val=12.0, v=1.0    step 3, epoch 1: cb_train=11.0, model_train=1.5
  std::vector<std::pair<std::int64_t, std::map<std::string, double>>> epoch_rows;
  for (const auto& row : logger->rows) {
    if (!row.second.contains("loss")) epoch_rows.push_back(row);
  }
  using Row = std::map<std::string, double>;
  const std::vector<std::pair<std::int64_t, Row>> lightning{
      {1, Row{{"cb_val", 2.0}, {"epoch", 0.0}, {"v", 1.0}}},
      {1, Row{{"cb_train", 1.0}, {"epoch", 0.0}, {"model_train", 0.5}}},
      {3, Row{{"cb_val", 12.0}, {"epoch", 1.0}, {"v", 1.0}}},
      {3, Row{{"cb_train", 11.0}, {"epoch", 1.0}, {"model_train", 1.5}}},
  };
  CHECK(epoch_rows == lightning);
  // No step row carries an epoch-end value (they are epoch values only).
  for (const auto& row : logger->rows) {
    CHECK_FALSE(row.second.contains("cb_train_step"));
    if (row.second.contains("loss")) CHECK_FALSE(row.second.contains("cb_train"));
  }
  CHECK(trainer.callback_metrics().at("cb_train") == 11.0);
  CHECK(trainer.callback_metrics().at("model_train") == 1.5);
}

TEST_CASE("epoch-level hooks refuse on_step=true and on_epoch=false with Lightning's message") {
  TempDir dir;
  struct StepInEpochEnd {
    void on_train_epoch_end(volt::TrainerState& state) { state.log("x", 1.0, {.on_step = true}); }
  };
  struct NoEpochInValidationEnd {
    void on_validation_epoch_end(volt::TrainerState& state) { state.log("x", 1.0, {.on_epoch = false}); }
  };
  auto options = quiet_options(dir);
  options.num_sanity_val_steps = 0;
  {
    auto model = std::make_shared<volt_test::Regressor>();
    volt::Trainer<volt::CPU> trainer(options, StepInEpochEnd{});
    // Lightning 2.6.6 (record_loop_mends.py, "BAD").
    VOLT_CHECK_THROWS_CONTAINS(trainer.fit(model, volt_test::make_batches(2)), volt::MisconfigurationError,
                               "You can't `self.log(on_step=True)` inside `on_train_epoch_end`, must be one of (False,).");
  }
  {
    auto model = std::make_shared<volt_test::Regressor>();
    volt::Trainer<volt::CPU> trainer(options, NoEpochInValidationEnd{});
    // Lightning 2.6.6 (record_loop_mends.py, "BAD2").
    VOLT_CHECK_THROWS_CONTAINS(trainer.fit(model, volt_test::make_batches(2), volt_test::make_batches(1)),
                               volt::MisconfigurationError,
                               "You can't `self.log(on_epoch=False)` inside `on_validation_epoch_end`, must be one of "
                               "(True,).");
  }
  {
    // In a step hook the training defaults stay: a value logged in on_train_batch_end is a step value, in the
    // row of its step.
    struct InBatchEnd {
      void on_train_batch_end(volt::TrainerState& state, const torch::Tensor&, std::int64_t) { state.log("b", 3.0); }
    };
    auto model = std::make_shared<volt_test::Regressor>();
    auto logger = std::make_shared<MendsLogger>();
    auto logged = options;
    logged.logger = true;
    logged.log_every_n_steps = 1;
    volt::Trainer<volt::CPU> trainer(logged, logger, InBatchEnd{});
    trainer.fit(model, volt_test::make_batches(2));
    int with_b = 0;
    for (const auto& row : logger->rows) with_b += row.second.contains("b") ? 1 : 0;
    // Each step's row holds the value logged in its on_train_batch_end, as in Lightning ("BATCH_END").
    CHECK(with_b == 2);
  }
}

TEST_CASE("val_check_interval longer than the epoch is refused also without validation data") {
  TempDir dir;
  auto model = std::make_shared<volt_test::Regressor>();
  auto options = quiet_options(dir);
  options.limit_train_batches = std::int64_t{1};
  options.val_check_interval = std::int64_t{3};
  {
    volt::Trainer<volt::CPU> trainer(options);
    // Lightning 2.6.6 (record_loop_mends.py, "VCI"): ValueError, with its leading space.
    CHECK_THROWS_WITH_AS(trainer.fit(model, volt_test::make_batches(2)),
                         " `val_check_interval` (3) must be less than or equal to the number of the training batches "
                         "(1). If you want to disable validation set `limit_val_batches` to 0.0 instead. If you want to "
                         "validate based on the total training batches, set `check_val_every_n_epoch=None`.",
                         std::invalid_argument);
    CHECK(trainer.global_step() == 0);
  }
  {
    // limit_val_batches=0 lets it through, as in Lightning ("VCI limit0": no error).
    auto limited = options;
    limited.limit_val_batches = std::int64_t{0};
    volt::Trainer<volt::CPU> trainer(limited);
    trainer.fit(model, volt_test::make_batches(2));
    CHECK(trainer.global_step() == 1);
  }
  {
    // With check_val_every_n_epoch unset the interval counts across epochs and is not refused.
    auto across = options;
    across.check_val_every_n_epoch = std::nullopt;
    volt::Trainer<volt::CPU> trainer(across);
    trainer.fit(model, volt_test::make_batches(2));
    CHECK(trainer.global_step() == 1);
  }
}

TEST_CASE("the smallest fraction in the limit_train_batches message is printed as Python prints it") {
  TempDir dir;
  auto model = std::make_shared<volt_test::Regressor>();
  // Lightning 2.6.6 (record_loop_mends.py, "FRAC"): 3 batches at 0.1, 64 at 0.01.
  const std::vector<std::tuple<int, double, std::string>> cases{
      {3, 0.1,
       "You requested to check 0.1 of the `train_dataloader` but 0.1 * 3 < 1. Please increase the "
       "`limit_train_batches` argument. Try at least `limit_train_batches=0.3333333333333333`"},
      {4, 0.1,
       "You requested to check 0.1 of the `train_dataloader` but 0.1 * 4 < 1. Please increase the "
       "`limit_train_batches` argument. Try at least `limit_train_batches=0.25`"},
      {64, 0.01,
       "You requested to check 0.01 of the `train_dataloader` but 0.01 * 64 < 1. Please increase the "
       "`limit_train_batches` argument. Try at least `limit_train_batches=0.015625`"},
  };
  for (const auto& [batches, fraction, message] : cases) {
    auto options = quiet_options(dir);
    options.limit_train_batches = fraction;
    volt::Trainer<volt::CPU> trainer(options);
    CHECK_THROWS_WITH_AS(trainer.fit(model, volt_test::make_batches(batches)), message.c_str(),
                         volt::MisconfigurationError);
  }
}

namespace {
struct ModelWithHparams : volt_test::Regressor {
  std::map<std::string, std::string> hparams() const { return {{"hidden", "16"}, {"lr", "0.01"}}; }
};
}  // namespace

TEST_CASE("a model's hparams() reach every logger once at the start of fit") {
  TempDir dir;
  auto model = std::make_shared<ModelWithHparams>();
  auto logger = std::make_shared<MendsLogger>();
  auto options = quiet_options(dir);
  options.logger = true;
  volt::Trainer<volt::CPU> trainer(options, logger);
  trainer.fit(model, volt_test::make_batches(2));
  REQUIRE(logger->hparams.size() == 1);
  const auto& params = logger->hparams.front();
  CHECK(params.at("hidden") == "16");
  CHECK(params.at("lr") == "0.01");
  CHECK(params.at("accelerator") == "cpu");
  CHECK(params.at("precision") == "32-true");
  CHECK(params.contains("strategy"));
}

namespace {
// The loss is NaN, and so is the gradient SqrtBackward0 computes.
struct NanGradientModel : volt_test::Regressor {
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t) {
    return torch::sqrt(-forward(batch.data).pow(2) - 1.0).mean();
  }
};
}  // namespace

TEST_CASE("detect_anomaly runs fit under LibTorch's anomaly mode, and restores the mode afterwards") {
  TempDir dir;
  auto options = quiet_options(dir);
  {
    auto model = std::make_shared<NanGradientModel>();
    volt::Trainer<volt::CPU> trainer(options);
    trainer.fit(model, volt_test::make_batches(2));  // off: the NaN goes unnoticed
    CHECK(trainer.global_step() == 2);
  }
  options.detect_anomaly = true;
  auto model = std::make_shared<NanGradientModel>();
  volt::Trainer<volt::CPU> trainer(options);
  // LibTorch's autograd engine rethrows the error as a std::runtime_error (1.13) or c10::Error (2.x).
  VOLT_CHECK_THROWS_CONTAINS(trainer.fit(model, volt_test::make_batches(2)), std::exception,
                             "Function 'SqrtBackward0' returned nan values in its 0th output.");
  CHECK(trainer.global_step() == 0);
  CHECK_FALSE(torch::autograd::AnomalyMode::is_enabled());
}

namespace {
struct StepPositions {
  std::shared_ptr<std::vector<std::pair<std::int64_t, std::int64_t>>> steps =
      std::make_shared<std::vector<std::pair<std::int64_t, std::int64_t>>>();
  void on_before_optimizer_step(volt::TrainerState& state, torch::optim::Optimizer&) {
    steps->emplace_back(state.current_epoch, state.batch_idx);
  }
};
}  // namespace

TEST_CASE("GradientAccumulationScheduler changes the accumulation per epoch as Lightning's does") {
  TempDir dir;
  auto options = quiet_options(dir);
  options.max_epochs = 3;
  auto model = std::make_shared<volt_test::Regressor>();
  StepPositions positions;
  volt::Trainer<volt::CPU> trainer(options, volt::GradientAccumulationScheduler({{1, 2}, {2, 3}}), positions);
  trainer.fit(model, volt_test::make_batches(5));
  // Lightning 2.6.6, the same schedule over 5 batches x 3 epochs (record_loop_mends.py, "SCHEDULE").
  const std::vector<std::pair<std::int64_t, std::int64_t>> lightning{{0, 0}, {0, 1}, {0, 2}, {0, 3}, {0, 4},
                                                                     {1, 1}, {1, 3}, {1, 4}, {2, 2}, {2, 4}};
  CHECK(*positions.steps == lightning);
  CHECK(trainer.global_step() == 10);
}

TEST_CASE("GradientAccumulationScheduler refuses what Lightning refuses, with its messages") {
  CHECK_THROWS_WITH_AS(volt::GradientAccumulationScheduler({}), "Empty dict cannot be interpreted correct",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(volt::GradientAccumulationScheduler({{-1, 2}, {3, 1}}),
                       "Epoch should be an int greater than or equal to 0. Got [-1, 3].", volt::MisconfigurationError);
  CHECK_THROWS_WITH_AS(volt::GradientAccumulationScheduler({{0, 0}, {3, 1}}),
                       "Accumulation factor should be an int greater than 0. Got [0, 1].", volt::MisconfigurationError);
  const volt::GradientAccumulationScheduler late({{4, 2}});
  CHECK(late.get_accumulate_grad_batches(0) == 1);
  CHECK(late.get_accumulate_grad_batches(3) == 1);
  CHECK(late.get_accumulate_grad_batches(9) == 2);
  CHECK(late.going_to_accumulate_grad_batches());
  TempDir dir;
  auto options = quiet_options(dir);
  options.accumulate_grad_batches = 2;
  auto model = std::make_shared<volt_test::Regressor>();
  volt::Trainer<volt::CPU> trainer(options, volt::GradientAccumulationScheduler({{0, 2}}));
  CHECK_THROWS_WITH_AS(trainer.fit(model, volt_test::make_batches(2)),
                       doctest::Contains("You have set `accumulate_grad_batches` and are using the "
                                         "`GradientAccumulationScheduler` callback. Either remove "
                                         "`accumulate_grad_batches` from the Trainer or remove the callback."),
                       std::invalid_argument);
}

namespace {
struct ModelWithStepHooks : volt_test::Regressor {
  int backward_hooks = 0;
  void on_before_backward(const torch::Tensor&) { ++backward_hooks; }
  void on_before_optimizer_step(torch::optim::Optimizer&, volt::StepContext&) {}
};
}  // namespace

TEST_CASE("cuda_graphs: model hooks inside the step keep it eager, and say so") {
  TempDir dir;
  auto options = quiet_options(dir);
  options.cuda_graphs = true;
  auto model = std::make_shared<ModelWithStepHooks>();
  volt_test::CaptureLog log;
  volt::Trainer<volt::CPU> trainer(options, volt::GradientAccumulationScheduler({{1, 2}}));
  trainer.fit(model, volt_test::make_batches(3));
  CHECK(model->backward_hooks == 3);
  CHECK(log.warned("the model has on_before_backward, which runs inside the step"));
  CHECK(log.warned("the model has on_before_optimizer_step, which runs inside the step"));
  CHECK_FALSE(log.warned("the model has on_after_backward"));
  CHECK(log.warned("a GradientAccumulationScheduler changes accumulate_grad_batches between epochs"));
}

namespace {

// A scheduler that records where the Trainer steps it ("scheduler <epoch> <batch_idx>"); the learning rate stays.
struct RecordingScheduler : torch::optim::LRScheduler {
  RecordingScheduler(torch::optim::Optimizer& optimizer, Events events, std::shared_ptr<std::string> position)
      : torch::optim::LRScheduler(optimizer), events_(std::move(events)), position_(std::move(position)) {}

 protected:
  std::vector<double> get_lrs() override {
    // Every step() is the Trainer's: LibTorch's constructor takes none (PyTorch's takes one, which
    // record_loop_mends.py does not record).
    events_->push_back("scheduler " + *position_);
    return get_current_lrs();
  }

 private:
  Events events_;
  std::shared_ptr<std::string> position_;
};

// Lightning's model of record_loop_mends.py's skip_and_frequency: on_train_batch_start returns -1 at the
// positions in `skip_at`; one step-interval scheduler with `frequency`.
struct SkippingModel : volt_test::Regressor {
  std::set<std::pair<std::int64_t, std::int64_t>> skip_at;
  std::int64_t frequency = 1;
  Events events = std::make_shared<std::vector<std::string>>();
  std::shared_ptr<std::string> position = std::make_shared<std::string>();
  std::int64_t epoch = 0;
  std::shared_ptr<torch::optim::SGD> optimizer;

  std::string at(std::int64_t batch_idx) const { return std::to_string(epoch) + " " + std::to_string(batch_idx); }
  void on_train_epoch_start(volt::StepContext& ctx) { epoch = ctx.trainer().current_epoch; }
  int on_train_batch_start(const torch::data::Example<>&, std::int64_t batch_idx) {
    *position = at(batch_idx);
    return skip_at.count({epoch, batch_idx}) != 0 ? -1 : 0;
  }
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t batch_idx) {
    events->push_back("train " + at(batch_idx));
    return torch::mse_loss(forward(batch.data), batch.target);
  }
  void on_train_batch_end(const torch::Tensor&, const torch::data::Example<>&, std::int64_t batch_idx) {
    events->push_back("batch_end " + at(batch_idx));
  }
  void validation_step(const torch::data::Example<>&, std::int64_t batch_idx) {
    events->push_back("val " + at(batch_idx));
  }
  void on_train_epoch_end(volt::StepContext& ctx) {
    events->push_back("epoch_end " + std::to_string(epoch) + " " + std::to_string(ctx.trainer().global_step));
  }
  volt::OptimizerConfig configure_optimizers() {
    optimizer = std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(0.1));
    volt::OptimizerConfig config{optimizer};
    config.lr_schedulers.push_back({std::make_shared<RecordingScheduler>(*optimizer, events, position),
                                    volt::SchedulerInterval::step, frequency});
    return config;
  }
};

// Lightning's events, as record_loop_mends.py prints them ("('train', 0, 1)" -> "train 0 1").
std::vector<std::string> lightning_events(const std::string& printed) {
  std::vector<std::string> events;
  std::string current;
  bool inside = false;
  for (const char c : printed) {
    if (c == '(') {
      inside = true;
      current.clear();
    } else if (c == ')') {
      inside = false;
      events.push_back(current);
    } else if (inside && c != '\'' && c != ',') {
      current += c;
    }
  }
  return events;
}

std::pair<std::vector<std::string>, std::int64_t> run_skipping(std::set<std::pair<std::int64_t, std::int64_t>> skip_at,
                                                               std::int64_t frequency, std::int64_t accumulate,
                                                               int batches) {
  TempDir dir;
  auto options = quiet_options(dir);
  options.max_epochs = 2;
  options.num_sanity_val_steps = 0;
  options.accumulate_grad_batches = accumulate;
  auto model = std::make_shared<SkippingModel>();
  model->skip_at = std::move(skip_at);
  model->frequency = frequency;
  std::vector<torch::data::Example<>> train, val;
  for (int i = 0; i < batches; ++i) train.push_back({torch::randn({1, 2}), torch::randn({1, 1})});
  for (int i = 0; i < 2; ++i) val.push_back({torch::randn({1, 2}), torch::randn({1, 1})});
  volt::Trainer<volt::CPU> trainer(options);
  trainer.fit(model, train, val);
  return {*model->events, trainer.global_step()};
}

}  // namespace

TEST_CASE("a model's on_train_batch_start returning -1 ends the epoch as in Lightning") {
  SUBCASE("at batch 3 of 6: no step, no on_train_batch_end, no validation in that epoch") {
    const auto [events, steps] = run_skipping({{0, 3}}, 1, 1, 6);
    CHECK(steps == 9);
    CHECK(events == lightning_events(
        "[('train', 0, 0), ('scheduler', 0, 0), ('batch_end', 0, 0), ('train', 0, 1), ('scheduler', 0, 1), "
        "('batch_end', 0, 1), ('train', 0, 2), ('scheduler', 0, 2), ('batch_end', 0, 2), ('scheduler', 0, 3), "
        "('epoch_end', 0, 3), ('train', 1, 0), ('scheduler', 1, 0), ('batch_end', 1, 0), ('train', 1, 1), "
        "('scheduler', 1, 1), ('batch_end', 1, 1), ('train', 1, 2), ('scheduler', 1, 2), ('batch_end', 1, 2), "
        "('train', 1, 3), ('scheduler', 1, 3), ('batch_end', 1, 3), ('train', 1, 4), ('scheduler', 1, 4), "
        "('batch_end', 1, 4), ('train', 1, 5), ('scheduler', 1, 5), ('batch_end', 1, 5), ('val', 1, 0), "
        "('val', 1, 1), ('epoch_end', 1, 9)]"));
  }
  SUBCASE("at an epoch's first batch") {
    const auto [events, steps] = run_skipping({{1, 0}}, 1, 1, 6);
    CHECK(steps == 6);
    const auto expected = lightning_events(
        "[('train', 0, 0), ('scheduler', 0, 0), ('batch_end', 0, 0), ('train', 0, 1), ('scheduler', 0, 1), "
        "('batch_end', 0, 1), ('train', 0, 2), ('scheduler', 0, 2), ('batch_end', 0, 2), ('train', 0, 3), "
        "('scheduler', 0, 3), ('batch_end', 0, 3), ('train', 0, 4), ('scheduler', 0, 4), ('batch_end', 0, 4), "
        "('train', 0, 5), ('scheduler', 0, 5), ('batch_end', 0, 5), ('val', 0, 0), ('val', 0, 1), "
        "('epoch_end', 0, 6), ('scheduler', 1, 0), ('epoch_end', 1, 6)]");
    CHECK(events == expected);
  }
  SUBCASE("inside an accumulation window: the window's gradients are not stepped") {
    const auto [events, steps] = run_skipping({{0, 3}}, 1, 2, 6);
    CHECK(steps == 4);
    CHECK(events == lightning_events(
        "[('train', 0, 0), ('batch_end', 0, 0), ('train', 0, 1), ('scheduler', 0, 1), ('batch_end', 0, 1), "
        "('train', 0, 2), ('batch_end', 0, 2), ('scheduler', 0, 3), ('epoch_end', 0, 1), ('train', 1, 0), "
        "('batch_end', 1, 0), ('train', 1, 1), ('scheduler', 1, 1), ('batch_end', 1, 1), ('train', 1, 2), "
        "('batch_end', 1, 2), ('train', 1, 3), ('scheduler', 1, 3), ('batch_end', 1, 3), ('train', 1, 4), "
        "('batch_end', 1, 4), ('train', 1, 5), ('scheduler', 1, 5), ('batch_end', 1, 5), ('val', 1, 0), "
        "('val', 1, 1), ('epoch_end', 1, 4)]"));
  }
}

TEST_CASE("a step-interval scheduler's frequency counts the epoch's batches, as Lightning's does") {
  auto schedulers = [](const std::vector<std::string>& events) {
    std::vector<std::string> kept;
    for (const auto& event : events) {
      if (event.rfind("scheduler", 0) == 0) kept.push_back(event);
    }
    return kept;
  };
  SUBCASE("frequency 3 over epochs of 10 batches: batches 2, 5, 8 of each epoch") {
    const auto [events, steps] = run_skipping({}, 3, 1, 10);
    CHECK(steps == 20);
    CHECK(schedulers(events) == std::vector<std::string>{"scheduler 0 2", "scheduler 0 5", "scheduler 0 8",
                                                         "scheduler 1 2", "scheduler 1 5", "scheduler 1 8"});
  }
  SUBCASE("frequency 2 with accumulate_grad_batches 2: every optimizer step (batch_idx + 1 is even)") {
    const auto [events, steps] = run_skipping({}, 2, 2, 10);
    CHECK(steps == 10);
    CHECK(schedulers(events).size() == 10);
    CHECK(schedulers(events).front() == "scheduler 0 1");
    CHECK(schedulers(events).back() == "scheduler 1 9");
  }
  SUBCASE("frequency 3 with a skip at batch 4") {
    const auto [events, steps] = run_skipping({{0, 4}}, 3, 1, 10);
    CHECK(steps == 14);
    CHECK(schedulers(events) == std::vector<std::string>{"scheduler 0 2", "scheduler 1 2", "scheduler 1 5",
                                                         "scheduler 1 8"});
  }
}

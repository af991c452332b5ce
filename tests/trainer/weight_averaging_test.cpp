// volt::WeightAveraging, volt::EMAWeightAveraging, volt::StochasticWeightAveraging and volt::optim::SWALR:
// averages against hand computations from the recorded weight trajectory, SWALR against PyTorch's rates,
// BatchNorm statistics recomputed, validation on the averaged weights, checkpoints holding the averaged weights
// as their model entry (Lightning's state_dict) and the model's beside them, exact resume, Lightning's refusals.
#include "test_common.hpp"
#include "trainer/trainer_fixtures.hpp"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace {

using volt_test::Batches;
using volt_test::TempDir;

/// A linear regressor with fixed initial weights, trained by plain SGD (lr 0.1) or with a StepLR; its
/// validation logs the sum of its weights, so a test can tell which weights validation ran with.
struct Linear2 : torch::nn::Module {
  torch::nn::Linear linear{torch::nn::Linear(2, 1)};
  bool with_step_lr = false;
  bool two_schedulers = false;
  bool step_interval = false;
  Linear2() {
    register_module("linear", linear);
    torch::NoGradGuard no_grad;
    linear->weight.copy_(torch::tensor({{0.3, -0.2}}));
    linear->bias.fill_(0.1);
  }
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t, volt::StepContext& ctx) {
    auto loss = torch::mse_loss(linear->forward(batch.data), batch.target);
    ctx.log("train_loss", loss);
    return loss;
  }
  void validation_step(const torch::data::Example<>& batch, std::int64_t, volt::StepContext& ctx) {
    (void)batch;
    ctx.log("weight_sum", linear->weight.sum() + linear->bias.sum());
  }
  void test_step(const torch::data::Example<>& batch, std::int64_t, volt::StepContext& ctx) {
    (void)batch;
    ctx.log("test_weight_sum", linear->weight.sum() + linear->bias.sum());
  }
  volt::OptimizerConfig configure_optimizers() {
    auto optimizer = std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(0.1));
    volt::OptimizerConfig config{optimizer};
    if (with_step_lr) config.lr_scheduler = std::make_shared<torch::optim::StepLR>(*optimizer, 1, 0.5);
    if (step_interval) config.interval = volt::SchedulerInterval::step;
    if (two_schedulers) config.lr_schedulers.push_back({std::make_shared<torch::optim::StepLR>(*optimizer, 1, 0.5)});
    return config;
  }
};

/// Records the model's weights after every optimizer step and at every epoch start, and the learning rate
/// of every batch.
struct AveragingRecorder {
  std::shared_ptr<std::vector<torch::Tensor>> after_step = std::make_shared<std::vector<torch::Tensor>>();
  std::shared_ptr<std::vector<torch::Tensor>> at_epoch_start = std::make_shared<std::vector<torch::Tensor>>();
  std::shared_ptr<std::vector<double>> lrs = std::make_shared<std::vector<double>>();
  static torch::Tensor flat(volt::TrainerState& state) {
    std::vector<torch::Tensor> parts;
    for (const auto& p : state.model->parameters()) parts.push_back(p.detach().flatten().clone());
    return torch::cat(parts);
  }
  void on_train_epoch_start(volt::TrainerState& state) { at_epoch_start->push_back(flat(state)); }
  void on_train_batch_start(volt::TrainerState& state, std::int64_t) {
    lrs->push_back(state.optimizers.front()->param_groups().front().options().get_lr());
  }
  void on_train_batch_end(volt::TrainerState& state, const torch::Tensor&, std::int64_t) {
    after_step->push_back(flat(state));
  }
};

/// Writes a full checkpoint at the end of `epoch`, or after batch `batch` of it.
struct SaveAt {
  std::int64_t epoch;
  std::int64_t batch;  // -1: at the epoch's end
  std::filesystem::path path;
  void on_train_epoch_end(volt::TrainerState& state) {
    if (batch < 0 && state.current_epoch == epoch) state.save_checkpoint(path, false);
  }
  void on_train_batch_end(volt::TrainerState& state, const torch::Tensor&, std::int64_t batch_idx) {
    if (batch >= 0 && state.current_epoch == epoch && batch_idx == batch) state.save_checkpoint(path, false);
  }
};

/// Manual optimization with one SGD optimizer.
struct OneOptimizerManual : torch::nn::Module {
  static constexpr bool automatic_optimization = false;
  torch::nn::Linear linear{torch::nn::Linear(2, 1)};
  OneOptimizerManual() { register_module("linear", linear); }
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t, volt::StepContext& ctx) {
    auto& optimizer = ctx.optimizer();
    auto loss = torch::mse_loss(linear->forward(batch.data), batch.target);
    optimizer.zero_grad();
    ctx.manual_backward(loss);
    optimizer.step();
    return loss;
  }
  std::shared_ptr<torch::optim::SGD> configure_optimizers() {
    return std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(0.1));
  }
};

/// Manual optimization with two optimizers.
struct TwoOptimizersManual : torch::nn::Module {
  static constexpr bool automatic_optimization = false;
  torch::nn::Linear a{torch::nn::Linear(2, 1)};
  torch::nn::Linear b{torch::nn::Linear(2, 1)};
  TwoOptimizersManual() {
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
    return loss;
  }
  std::vector<volt::OptimizerConfig> configure_optimizers() {
    return {{std::make_shared<torch::optim::SGD>(a->parameters(), torch::optim::SGDOptions(0.1))},
            {std::make_shared<torch::optim::SGD>(b->parameters(), torch::optim::SGDOptions(0.1))}};
  }
};

torch::Tensor flat_parameters(torch::nn::Module& module) {
  std::vector<torch::Tensor> parts;
  for (const auto& p : module.parameters()) parts.push_back(p.detach().flatten());
  return torch::cat(parts);
}

torch::Tensor flat(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> parts;
  for (const auto& t : tensors) parts.push_back(t.detach().flatten().cpu());
  return torch::cat(parts);
}

void check_close(const torch::Tensor& actual, const torch::Tensor& expected, double tolerance = 1e-6) {
  REQUIRE(actual.sizes() == expected.sizes());
  const double error = (actual - expected).abs().max().item<double>();
  CHECK_MESSAGE(error <= tolerance, "max abs error " << error << "\nactual " << actual << "\nexpected " << expected);
}

}  // namespace

TEST_CASE("WeightAveraging: the equal average of the weights after every optimizer step, put in the model at the end") {
  TempDir dir;
  auto options = volt_test::quiet_options(dir);
  options.max_epochs = 2;
  AveragingRecorder recorder;
  volt::Trainer<volt::CPU> trainer(options, recorder, volt::WeightAveraging{});
  auto model = std::make_shared<Linear2>();
  trainer.fit(model, volt_test::make_batches(3));
  REQUIRE(recorder.after_step->size() == 6);
  torch::Tensor expected = torch::zeros_like(recorder.after_step->front());
  for (const auto& w : *recorder.after_step) expected += w;
  expected /= 6.0;
  auto* averaging = trainer.callback<volt::WeightAveraging>();
  REQUIRE(averaging != nullptr);
  CHECK(averaging->n_averaged() == 6);
  check_close(flat(averaging->averaged_parameters()), expected);
  check_close(flat_parameters(*model), expected);  // on_train_end copied the average in
  CHECK_FALSE(torch::allclose(expected, recorder.after_step->back()));
}

TEST_CASE("EMAWeightAveraging: decay, update_every_n_steps and update_starting_at_step as Lightning's should_update") {
  TempDir dir;
  auto options = volt_test::quiet_options(dir);
  options.max_epochs = 2;
  AveragingRecorder recorder;
  volt::Trainer<volt::CPU> trainer(
      options, recorder,
      volt::EMAWeightAveraging({.decay = 0.9, .update_every_n_steps = 2, .update_starting_at_step = 1}));
  auto model = std::make_shared<Linear2>();
  trainer.fit(model, volt_test::make_batches(4));
  const auto& w = *recorder.after_step;
  REQUIRE(w.size() == 8);
  // Step indices 2, 4, 6 qualify (>= 1 and even): the first copies, the next two average with decay 0.9.
  torch::Tensor expected = w[2];
  expected = 0.9 * expected + 0.1 * w[4];
  expected = 0.9 * expected + 0.1 * w[6];
  auto* ema = trainer.callback<volt::EMAWeightAveraging>();
  REQUIRE(ema != nullptr);
  CHECK(ema->n_averaged() == 3);
  check_close(flat(ema->averaged_parameters()), expected);
  check_close(flat_parameters(*model), expected);

  VOLT_CHECK_THROWS_CONTAINS(volt::ema_average(1.5), std::invalid_argument,
                             "Invalid decay value 1.5 provided. Please provide a value in [0,1] range.");
  VOLT_CHECK_THROWS_CONTAINS(volt::EMAWeightAveraging({.update_every_n_steps = -1}), volt::MisconfigurationError,
                             "update_every_n_steps must be >= 0");
}

TEST_CASE("WeightAveraging: should_update at epoch ends only; buffers follow the model without use_buffers") {
  TempDir dir;
  auto options = volt_test::quiet_options(dir);
  options.max_epochs = 3;
  AveragingRecorder recorder;
  volt::WeightAveragingOptions averaging_options;
  averaging_options.avg_fn = volt::ema_average(0.5);
  averaging_options.should_update = [](std::optional<std::int64_t> step, std::optional<std::int64_t> epoch) {
    return !step && epoch && *epoch >= 1;
  };
  volt::Trainer<volt::CPU> trainer(options, recorder, volt::WeightAveraging(averaging_options));
  auto model = std::make_shared<Linear2>();
  trainer.fit(model, volt_test::make_batches(2));
  const auto& w = *recorder.after_step;
  REQUIRE(w.size() == 6);
  // Epoch ends 1 and 2 (after steps 4 and 6): copy, then 0.5 * average + 0.5 * weights.
  const torch::Tensor expected = 0.5 * w[3] + 0.5 * w[5];
  CHECK(trainer.callback<volt::WeightAveraging>()->n_averaged() == 2);
  check_close(flat_parameters(*model), expected);
}

TEST_CASE("WeightAveraging: validation runs with the averaged weights and training continues with its own") {
  TempDir dir;
  auto options = volt_test::quiet_options(dir);
  options.max_epochs = 2;
  options.num_sanity_val_steps = 0;
  AveragingRecorder plain_recorder;
  {
    volt::Trainer<volt::CPU> plain(options, plain_recorder);
    auto model = std::make_shared<Linear2>();
    plain.fit(model, volt_test::make_batches(3), volt_test::make_batches(1));
  }
  AveragingRecorder recorder;
  volt::Trainer<volt::CPU> trainer(options, recorder, volt::WeightAveraging{});
  auto model = std::make_shared<Linear2>();
  trainer.fit(model, volt_test::make_batches(3), volt_test::make_batches(1));
  // The swaps around validation put the model's own weights back: the trajectory is the plain run's.
  REQUIRE(recorder.after_step->size() == plain_recorder.after_step->size());
  for (std::size_t i = 0; i < recorder.after_step->size(); ++i) {
    CHECK(torch::equal((*recorder.after_step)[i], (*plain_recorder.after_step)[i]));
  }
  // The last validation (end of epoch 2) saw the average of all 6 steps, which the model now holds.
  const double logged = trainer.callback_metrics().at("weight_sum");
  CHECK(logged == doctest::Approx(flat_parameters(*model).sum().item<double>()).epsilon(1e-6));
  CHECK(logged != doctest::Approx(recorder.after_step->back().sum().item<double>()).epsilon(1e-6));
}

TEST_CASE("optim::SWALR: PyTorch's rates, cosine and linear, with and without annealing epochs") {
  // Recorded with tests/python/record_swalr.py (torch 2.11.0): two param groups with base rates 0.1 and
  // 0.02, swa_lr [0.05, 0.01]; the rates after construction and after each of 8 step() calls.
  struct Case {
    const char* strategy;
    std::int64_t anneal_epochs;
    std::vector<std::vector<double>> rates;
  };
  const std::vector<Case> cases = {
      {"cos", 3, {{0.1, 0.02}, {0.08750000000000001, 0.017499999999999998}, {0.06250000000000001, 0.0125}, {0.05, 0.01},
                  {0.05, 0.01}, {0.05, 0.01}, {0.05, 0.01}, {0.05, 0.01}, {0.05, 0.01}}},
      {"linear", 3, {{0.1, 0.02}, {0.08333333333333334, 0.01666666666666667}, {0.06666666666666668, 0.013333333333333334},
                     {0.05, 0.01}, {0.05, 0.01}, {0.05, 0.01}, {0.05, 0.01}, {0.05, 0.01}, {0.05, 0.01}}},
      {"cos", 0, {{0.05, 0.01}, {0.05, 0.01}, {0.05, 0.01}, {0.05, 0.01}, {0.05, 0.01}, {0.05, 0.01}, {0.05, 0.01},
                  {0.05, 0.01}, {0.05, 0.01}}},
      {"linear", 1, {{0.1, 0.02}, {0.05, 0.01}, {0.05, 0.01}, {0.05, 0.01}, {0.05, 0.01}, {0.05, 0.01}, {0.05, 0.01},
                     {0.05, 0.01}, {0.05, 0.01}}},
  };
  for (const auto& c : cases) {
    CAPTURE(c.strategy);
    CAPTURE(c.anneal_epochs);
    auto p1 = torch::zeros({1}, torch::requires_grad());
    auto p2 = torch::zeros({1}, torch::requires_grad());
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(std::vector<torch::Tensor>{p1}, std::make_unique<torch::optim::SGDOptions>(0.1));
    groups.emplace_back(std::vector<torch::Tensor>{p2}, std::make_unique<torch::optim::SGDOptions>(0.02));
    torch::optim::SGD optimizer(groups, torch::optim::SGDOptions(0.1));
    volt::optim::SWALR scheduler(optimizer, {0.05, 0.01}, c.anneal_epochs, c.strategy);
    for (std::size_t step = 0; step < c.rates.size(); ++step) {
      CAPTURE(step);
      if (step > 0) scheduler.step();
      for (std::size_t g = 0; g < 2; ++g) {
        CHECK(optimizer.param_groups()[g].options().get_lr() == doctest::Approx(c.rates[step][g]).epsilon(1e-14));
      }
    }
  }
  auto p = torch::zeros({1}, torch::requires_grad());
  torch::optim::SGD optimizer({p}, torch::optim::SGDOptions(0.1));
  VOLT_CHECK_THROWS_CONTAINS(volt::optim::SWALR(optimizer, {0.05}, 10, "exp"), std::invalid_argument,
                             "anneal_strategy must by one of 'cos' or 'linear', instead got exp");
  VOLT_CHECK_THROWS_CONTAINS(volt::optim::SWALR(optimizer, {0.05}, -1), std::invalid_argument,
                             "anneal_epochs must be equal or greater than 0, got -1");
  VOLT_CHECK_THROWS_CONTAINS(volt::optim::SWALR(optimizer, {0.05, 0.01}), std::invalid_argument,
                             "swa_lr must have the same length as optimizer.param_groups. swa_lr has 2 values, "
                             "param_groups has 1.");
}

TEST_CASE("StochasticWeightAveraging: SWALR from swa_epoch_start, the weights averaged at each epoch's start") {
  TempDir dir;
  auto options = volt_test::quiet_options(dir);
  options.max_epochs = 5;
  AveragingRecorder recorder;
  volt_test::CaptureLog log;
  volt::Trainer<volt::CPU> trainer(
      options, recorder,
      volt::StochasticWeightAveraging({.swa_lrs = {0.02}, .swa_epoch_start = 2, .annealing_epochs = 2}));
  auto model = std::make_shared<Linear2>();
  model->with_step_lr = true;
  trainer.fit(model, volt_test::make_batches(2));
  auto* swa = trainer.callback<volt::StochasticWeightAveraging>();
  REQUIRE(swa != nullptr);
  CHECK(swa->swa_start() == 1);
  // Epochs 0 and 1 at 0.1 (LibTorch's StepLR(1, 0.5) first halves at the end of epoch 1, a step later than
  // Python's); from epoch 1 SWALR anneals from 0.1 to 0.02 over two epochs (cosine: halfway after one) instead.
  const std::vector<double> expected_lrs = {0.1, 0.1, 0.1, 0.1, 0.06, 0.06, 0.02, 0.02, 0.02, 0.02};
  REQUIRE(recorder.lrs->size() == expected_lrs.size());
  for (std::size_t i = 0; i < expected_lrs.size(); ++i) CHECK((*recorder.lrs)[i] == doctest::Approx(expected_lrs[i]));
  CHECK(log.informed("Swapping scheduler `StepLR` for `SWALR`"));
  // Averaged at the starts of epochs 1..4: the weights the epochs 0..3 left.
  const auto& starts = *recorder.at_epoch_start;
  REQUIRE(starts.size() == 5);
  const torch::Tensor expected = (starts[1] + starts[2] + starts[3] + starts[4]) / 4.0;
  CHECK(swa->n_averaged() == 4);
  check_close(flat(swa->averaged_parameters()), expected);
  check_close(flat_parameters(*model), expected);
  CHECK(trainer.current_epoch() == 5);
  CHECK(trainer.global_step() == 10);
}

TEST_CASE("StochasticWeightAveraging: the rates follow SWALR's annealing (PyTorch's values)") {
  TempDir dir;
  auto options = volt_test::quiet_options(dir);
  options.max_epochs = 5;
  AveragingRecorder recorder;
  volt::Trainer<volt::CPU> trainer(
      options, recorder,
      volt::StochasticWeightAveraging({.swa_lrs = {0.05}, .swa_epoch_start = 0.4, .annealing_epochs = 3}));
  auto model = std::make_shared<Linear2>();
  trainer.fit(model, volt_test::make_batches(1));
  // swa_epoch_start 0.4 * 5 = epoch 2, swa_start 1: 0.1, then tests/python/record_swalr.py's cosine rates.
  const std::vector<double> expected = {0.1, 0.1, 0.08750000000000001, 0.06250000000000001, 0.05};
  REQUIRE(recorder.lrs->size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) CHECK((*recorder.lrs)[i] == doctest::Approx(expected[i]).epsilon(1e-14));
}

namespace {

/// Linear -> BatchNorm1d -> Linear, for the BatchNorm update.
struct WithBatchNorm : torch::nn::Module {
  torch::nn::Linear first{torch::nn::Linear(2, 3)};
  torch::nn::BatchNorm1d norm{torch::nn::BatchNorm1d(3)};
  torch::nn::Linear last{torch::nn::Linear(3, 1)};
  WithBatchNorm() {
    register_module("first", first);
    register_module("norm", norm);
    register_module("last", last);
  }
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t) {
    return torch::mse_loss(last->forward(norm->forward(first->forward(batch.data))), batch.target);
  }
  std::shared_ptr<torch::optim::SGD> configure_optimizers() {
    return std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(0.05));
  }
};

}  // namespace

TEST_CASE("StochasticWeightAveraging: BatchNorm statistics recomputed with the averaged weights (update_bn)") {
  TempDir dir;
  auto options = volt_test::quiet_options(dir);
  options.max_epochs = 3;
  torch::manual_seed(7);
  auto model = std::make_shared<WithBatchNorm>();
  const Batches data = volt_test::make_classification_batches(4, 6);
  Batches regression;
  for (const auto& b : data) regression.emplace_back(b.data.slice(1, 0, 2), b.data.slice(1, 2, 3));
  AveragingRecorder recorder;
  volt::Trainer<volt::CPU> trainer(options, recorder,
                                   volt::StochasticWeightAveraging({.swa_lrs = {0.01}, .swa_epoch_start = 1}));
  trainer.fit(model, regression);
  auto* swa = trainer.callback<volt::StochasticWeightAveraging>();
  CHECK(swa->n_averaged() == 3);
  const auto& starts = *recorder.at_epoch_start;
  check_close(flat_parameters(*model), (starts[0] + starts[1] + starts[2]) / 3.0);
  // By hand: the cumulative average (momentum none) of the batch statistics of the first layer's output.
  torch::NoGradGuard no_grad;
  torch::Tensor mean = torch::zeros({3}), var = torch::zeros({3});
  for (const auto& b : regression) {
    const auto h = model->first->forward(b.data);
    mean += h.mean(0);
    var += h.var(0, /*unbiased=*/true);
  }
  mean /= 4.0;
  var /= 4.0;
  check_close(model->norm->running_mean, mean, 1e-5);
  check_close(model->norm->running_var, var, 1e-5);
  CHECK(model->norm->num_batches_tracked.item<std::int64_t>() == 4);
  CHECK(model->norm->options.momentum() == c10::optional<double>(0.1));  // put back
  CHECK(trainer.global_step() == 12);  // the pass took no step
  CHECK(trainer.current_epoch() == 3);
}

TEST_CASE("StochasticWeightAveraging: training stopped before the last epoch leaves the model as it is") {
  TempDir dir;
  auto options = volt_test::quiet_options(dir);
  options.max_epochs = 4;
  options.max_steps = 5;
  AveragingRecorder recorder;
  volt::Trainer<volt::CPU> trainer(options, recorder,
                                   volt::StochasticWeightAveraging({.swa_lrs = {0.05}, .swa_epoch_start = 1}));
  auto model = std::make_shared<Linear2>();
  trainer.fit(model, volt_test::make_batches(2));
  CHECK(trainer.callback<volt::StochasticWeightAveraging>()->n_averaged() == 3);
  CHECK(torch::equal(flat_parameters(*model), recorder.after_step->back()));
}

namespace {

template <class Callback>
struct ResumeRun {
  torch::Tensor weights;
  std::vector<torch::Tensor> averaged;
  std::int64_t n_averaged = 0;
  std::vector<double> lrs;
};

template <class Callback>
ResumeRun<Callback> run_to_end(const Callback& callback, const volt::TrainerOptions& options, std::int64_t save_epoch,
                               std::int64_t save_batch, const std::filesystem::path& checkpoint, bool resume) {
  AveragingRecorder recorder;
  volt::Trainer<volt::CPU> trainer(options, recorder, callback, SaveAt{save_epoch, save_batch, checkpoint});
  auto model = std::make_shared<Linear2>();
  model->with_step_lr = true;
  trainer.fit(model, volt_test::make_batches(3), resume ? checkpoint : std::filesystem::path{});
  auto* found = trainer.template callback<Callback>();
  REQUIRE(found != nullptr);
  return {flat_parameters(*model).clone(), found->averaged_parameters(), found->n_averaged(), *recorder.lrs};
}

template <class Callback>
void check_exact_resume(const Callback& callback, std::int64_t save_epoch, std::int64_t save_batch) {
  TempDir dir;
  auto options = volt_test::quiet_options(dir);
  options.max_epochs = 5;
  const auto checkpoint = dir.path / "mid.ckpt";
  const auto whole = run_to_end(callback, options, save_epoch, save_batch, checkpoint, false);
  REQUIRE(std::filesystem::exists(checkpoint));
  const auto resumed = run_to_end(callback, options, -1, -1, checkpoint, true);
  CHECK(torch::equal(whole.weights, resumed.weights));
  CHECK(whole.n_averaged == resumed.n_averaged);
  REQUIRE(whole.averaged.size() == resumed.averaged.size());
  for (std::size_t i = 0; i < whole.averaged.size(); ++i) CHECK(torch::equal(whole.averaged[i], resumed.averaged[i]));
  // The resumed run's rates are the tail of the whole run's.
  REQUIRE(resumed.lrs.size() <= whole.lrs.size());
  const std::size_t offset = whole.lrs.size() - resumed.lrs.size();
  for (std::size_t i = 0; i < resumed.lrs.size(); ++i) CHECK(resumed.lrs[i] == whole.lrs[offset + i]);
}

}  // namespace

TEST_CASE("WeightAveraging and StochasticWeightAveraging: a resumed fit averages exactly as an uninterrupted one") {
  SUBCASE("EMA, checkpoint at an epoch's end") { check_exact_resume(volt::EMAWeightAveraging({.decay = 0.8}), 1, -1); }
  SUBCASE("EMA, checkpoint in the middle of an epoch") {
    check_exact_resume(volt::EMAWeightAveraging({.decay = 0.8}), 2, 0);
  }
  const volt::StochasticWeightAveraging swa({.swa_lrs = {0.02}, .swa_epoch_start = 2, .annealing_epochs = 2});
  SUBCASE("SWA, checkpoint at an epoch's end, SWALR swapped in") { check_exact_resume(swa, 2, -1); }
  SUBCASE("SWA, checkpoint in the middle of an epoch") { check_exact_resume(swa, 2, 1); }
  SUBCASE("SWA, checkpoint before SWA starts") { check_exact_resume(swa, 0, -1); }
}

TEST_CASE("StochasticWeightAveraging: Lightning's refusals and messages") {
  using volt::MisconfigurationError;
  using volt::StochasticWeightAveraging;
  const char* start_message = "swa_epoch_start should be a >0 integer or a float between 0 and 1.";
  CHECK_THROWS_WITH_AS(StochasticWeightAveraging({.swa_lrs = {0.1}, .swa_epoch_start = 0}), start_message,
                       MisconfigurationError);
  CHECK_THROWS_WITH_AS(StochasticWeightAveraging({.swa_lrs = {0.1}, .swa_epoch_start = 1.5}), start_message,
                       MisconfigurationError);
  CHECK_THROWS_WITH_AS(StochasticWeightAveraging({.swa_lrs = {0.1}, .swa_epoch_start = -0.1}), start_message,
                       MisconfigurationError);
  const char* lrs_message = "The `swa_lrs` should a positive float, or a list of positive floats";
  CHECK_THROWS_WITH_AS(StochasticWeightAveraging({.swa_lrs = {}}), lrs_message, MisconfigurationError);
  CHECK_THROWS_WITH_AS(StochasticWeightAveraging({.swa_lrs = {0.0}}), lrs_message, MisconfigurationError);
  CHECK_THROWS_WITH_AS(StochasticWeightAveraging({.swa_lrs = {0.1, -0.1}}), lrs_message, MisconfigurationError);
  VOLT_CHECK_THROWS_CONTAINS(StochasticWeightAveraging({.swa_lrs = {0.1}, .annealing_strategy = "exp"}),
                             std::invalid_argument, "anneal_strategy must by one of 'cos' or 'linear', instead got exp");
  VOLT_CHECK_THROWS_CONTAINS(StochasticWeightAveraging({.swa_lrs = {0.1}, .annealing_epochs = -2}),
                             std::invalid_argument, "anneal_epochs must be equal or greater than 0, got -2");

  TempDir dir;
  auto options = volt_test::quiet_options(dir);
  options.max_epochs = 2;
  SUBCASE("more than one LR scheduler") {
    volt::Trainer<volt::CPU> trainer(options, StochasticWeightAveraging({.swa_lrs = {0.1}}));
    auto model = std::make_shared<Linear2>();
    model->with_step_lr = true;
    model->two_schedulers = true;
    VOLT_CHECK_THROWS_CONTAINS(trainer.fit(model, volt_test::make_batches(1)), MisconfigurationError,
                               "SWA currently not supported for more than 1 `lr_scheduler`.");
  }
  SUBCASE("a fraction with max_epochs = -1") {
    options.max_epochs = -1;
    options.max_steps = 2;
    volt::Trainer<volt::CPU> trainer(options, StochasticWeightAveraging({.swa_lrs = {0.1}, .swa_epoch_start = 0.5}));
    auto model = std::make_shared<Linear2>();
    VOLT_CHECK_THROWS_CONTAINS(trainer.fit(model, volt_test::make_batches(1)), MisconfigurationError,
                               "SWA with `swa_epoch_start` as a float is not supported when `max_epochs=-1`. "
                               "Please provide `swa_epoch_start` as an integer.");
  }
  SUBCASE("several optimizers (manual optimization)") {
    volt::Trainer<volt::CPU> trainer(options, StochasticWeightAveraging({.swa_lrs = {0.1}}));
    auto model = std::make_shared<TwoOptimizersManual>();
    VOLT_CHECK_THROWS_CONTAINS(trainer.fit(model, volt_test::make_batches(1)), MisconfigurationError,
                               "SWA currently works with 1 `optimizer`.");
  }
  SUBCASE("manual optimization") {
    volt::Trainer<volt::CPU> trainer(options, StochasticWeightAveraging({.swa_lrs = {0.1}}));
    auto model = std::make_shared<OneOptimizerManual>();
    VOLT_CHECK_THROWS_CONTAINS(trainer.fit(model, volt_test::make_batches(1)), MisconfigurationError,
                               "StochasticWeightAveraging needs automatic optimization");
  }
}

TEST_CASE("WeightAveraging: manual optimization averages after each optimizer step") {
  TempDir dir;
  auto options = volt_test::quiet_options(dir);
  options.max_epochs = 1;
  volt::Trainer<volt::CPU> trainer(options, volt::WeightAveraging{});
  auto model = std::make_shared<OneOptimizerManual>();
  trainer.fit(model, volt_test::make_batches(3));
  CHECK(trainer.callback<volt::WeightAveraging>()->n_averaged() == 3);
}

TEST_CASE("WeightAveraging with cuda_graphs: the captured run averages as the eager one (CUDA)") {
  if (!torch::cuda::is_available()) {
    MESSAGE("skipped: no CUDA device (torch::cuda::is_available() is false)");
    return;
  }
  auto run = [](bool graphs) {
    TempDir dir;
    auto options = volt_test::quiet_options(dir);
    options.max_epochs = 2;
    options.cuda_graphs = graphs;
    options.num_sanity_val_steps = 0;
    volt::Trainer<volt::CUDA> trainer(options, volt::EMAWeightAveraging({.decay = 0.7}));
    auto model = std::make_shared<Linear2>();
    trainer.fit(model, volt_test::make_batches(6), volt_test::make_batches(1));
    return std::make_pair(flat_parameters(*model).cpu(), trainer.cuda_graph_replays());
  };
  const auto [eager, eager_replays] = run(false);
  const auto [graphed, replays] = run(true);
  CHECK(eager_replays == 0);
  CHECK(replays > 0);
  check_close(graphed, eager, 1e-6);
}

TEST_CASE("the weight-averaging examples of docs/optimization.md construct their Trainers") {
  // As written in docs/optimization.md ("Weight averaging (SWA and EMA)").
  volt::Trainer<> trainer({.max_epochs = 10}, volt::EMAWeightAveraging({.decay = 0.999}));
  volt::Trainer<> swa_steps({.max_epochs = 10},
                            volt::WeightAveraging({.device = torch::kCPU,
                                                   .should_update = [](std::optional<int64_t> step, std::optional<int64_t>) {
                                                     return step && *step >= 1000;
                                                   }}));
  volt::Trainer<> swa({.max_epochs = 10}, volt::StochasticWeightAveraging({.swa_lrs = {0.05}, .swa_epoch_start = 0.8}));
  CHECK(trainer.callback<volt::EMAWeightAveraging>() != nullptr);
  CHECK(swa_steps.callback<volt::WeightAveraging>() != nullptr);
  CHECK(swa.callback<volt::StochasticWeightAveraging>() != nullptr);
}

TEST_CASE("StochasticWeightAveraging and EMAWeightAveraging as Lightning 2.6.6: rates of every batch, final weights") {
  // Recorded with tests/oracle/record_weight_averaging.py (lightning 2.6.6, torch 2.11.0): the same regression,
  // initial weights, SGD(lr 0.1) and data; Lightning's StepLR(2, 0.5) there halves where LibTorch's
  // StepLR(1, 0.5) does here.
  struct Case {
    const char* name;
    std::int64_t epochs;
    int batches;
    bool step_lr;
    std::vector<double> lrs;
    std::vector<double> weights;
  };
  const std::vector<Case> cases = {
      {"swa", 5, 2, true, {0.1, 0.1, 0.1, 0.1, 0.06, 0.06, 0.02, 0.02, 0.02, 0.02},
       {0.41518813371658325, -0.10255327820777893, -0.07741433382034302}},
      {"swa_linear", 6, 1, false, {0.1, 0.1, 0.1, 0.07666666666666667, 0.05333333333333334, 0.03},
       {0.2225026786327362, -0.31413328647613525, -0.26635926961898804}},
      {"ema", 2, 3, false, {0.1, 0.1, 0.1, 0.1, 0.1, 0.1},
       {0.3283243477344513, -0.18610145151615143, -0.04425787553191185}},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    TempDir dir;
    auto options = volt_test::quiet_options(dir);
    options.max_epochs = c.epochs;
    AveragingRecorder recorder;
    auto model = std::make_shared<Linear2>();
    model->with_step_lr = c.step_lr;
    const std::string name = c.name;
    if (name == "swa") {
      volt::Trainer<volt::CPU> trainer(
          options, recorder,
          volt::StochasticWeightAveraging({.swa_lrs = {0.02}, .swa_epoch_start = 2, .annealing_epochs = 2}));
      trainer.fit(model, volt_test::make_batches(c.batches));
    } else if (name == "swa_linear") {
      volt::Trainer<volt::CPU> trainer(options, recorder,
                                       volt::StochasticWeightAveraging({.swa_lrs = {0.03},
                                                                        .swa_epoch_start = 0.5,
                                                                        .annealing_epochs = 3,
                                                                        .annealing_strategy = "linear"}));
      trainer.fit(model, volt_test::make_batches(c.batches));
    } else {
      volt::Trainer<volt::CPU> trainer(options, recorder,
                                       volt::EMAWeightAveraging({.decay = 0.9, .update_every_n_steps = 2}));
      trainer.fit(model, volt_test::make_batches(c.batches));
    }
    REQUIRE(recorder.lrs->size() == c.lrs.size());
    for (std::size_t i = 0; i < c.lrs.size(); ++i) CHECK((*recorder.lrs)[i] == doctest::Approx(c.lrs[i]).epsilon(1e-14));
    check_close(flat_parameters(*model), torch::tensor(c.weights, torch::kFloat), 2e-7);
  }
}

TEST_CASE("StochasticWeightAveraging: a scheduler that steps per step is swapped with Lightning's warning") {
  TempDir dir;
  auto options = volt_test::quiet_options(dir);
  options.max_epochs = 3;
  AveragingRecorder recorder;
  volt_test::CaptureLog log;
  volt::Trainer<volt::CPU> trainer(
      options, recorder, volt::StochasticWeightAveraging({.swa_lrs = {0.02}, .swa_epoch_start = 2, .annealing_epochs = 1}));
  auto model = std::make_shared<Linear2>();
  model->with_step_lr = true;
  model->step_interval = true;
  trainer.fit(model, volt_test::make_batches(2));
  CHECK(log.warned("SWA is currently only supported every epoch. Found LRSchedulerConfig(scheduler=StepLR, "
                   "interval='step', frequency=1)"));
  CHECK(log.informed("Swapping scheduler `StepLR` for `SWALR`"));
  // LibTorch's StepLR(1, 0.5) per step: 0.1, 0.1, then halved after step 2; SWALR from epoch 1 on: its base
  // rate 0.05 at epoch 1, 0.02 from epoch 2 (anneal_epochs 1), and no more per-step halving.
  const std::vector<double> expected = {0.1, 0.1, 0.05, 0.05, 0.02, 0.02};
  REQUIRE(recorder.lrs->size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) CHECK((*recorder.lrs)[i] == doctest::Approx(expected[i]));
}

namespace {

/// After optimizer step `step` (global_step == step): writes a full and a weights-only checkpoint, and records
/// the model's weights and the averaged ones at that moment (the averaging callback runs first).
struct SaveAtStep {
  std::int64_t step;
  std::filesystem::path full;
  std::filesystem::path weights_only;
  std::shared_ptr<const volt::WeightAveraging*> averaging = std::make_shared<const volt::WeightAveraging*>(nullptr);
  std::shared_ptr<torch::Tensor> model_at_save = std::make_shared<torch::Tensor>();
  std::shared_ptr<torch::Tensor> average_at_save = std::make_shared<torch::Tensor>();
  void on_train_batch_end(volt::TrainerState& state, const torch::Tensor&, std::int64_t) {
    if (state.global_step != step) return;
    *model_at_save = flat_parameters(*state.model).clone();
    *average_at_save = flat((*averaging)->averaged_parameters()).clone();
    state.save_checkpoint(full, false);
    state.save_checkpoint(weights_only, true);
  }
};

/// The module archive `key` of the checkpoint at `path`, loaded into a fresh Linear2, as flat parameters.
torch::Tensor checkpoint_entry(const std::filesystem::path& path, const std::string& key) {
  torch::serialize::InputArchive archive;
  volt::detail::load_archive(archive, path, torch::kCPU);
  torch::serialize::InputArchive entry;
  if (!archive.try_read(key, entry)) return {};
  Linear2 fresh;
  fresh.linear->weight.data().fill_(0.0);
  fresh.load(entry);
  return flat_parameters(fresh).clone();
}

std::int64_t checkpoint_n_averaged(const std::filesystem::path& path) {
  torch::serialize::InputArchive archive;
  volt::detail::load_archive(archive, path, torch::kCPU);
  torch::serialize::InputArchive averaging;
  if (!archive.try_read("averaging_state", averaging)) return -1;
  c10::IValue n_averaged;
  averaging.read("n_averaged", n_averaged);
  return n_averaged.toInt();
}

}  // namespace

TEST_CASE("WeightAveraging: a checkpoint's model entry holds the averaged weights, current_model_state the model's") {
  TempDir dir;
  auto options = volt_test::quiet_options(dir);
  options.max_epochs = 2;
  SaveAtStep save{3, dir.path / "step3.ckpt", dir.path / "step3_weights.ckpt"};
  volt::Trainer<volt::CPU> trainer(options, volt::EMAWeightAveraging({.decay = 0.9}), save);
  *save.averaging = trainer.callback<volt::EMAWeightAveraging>();
  auto model = std::make_shared<Linear2>();
  trainer.fit(model, volt_test::make_batches(3));

  // Recorded with tests/oracle/record_weight_averaging.py (Lightning 2.6.6's checkpoint after step 3 of the same
  // EMAWeightAveraging(decay=0.9) fit): state_dict, current_model_state, averaging_state["n_averaged"].
  const auto lightning_state_dict = torch::tensor({0.32080167531967163, -0.19133581221103668, -0.021375028416514397},
                                                  torch::kFloat);
  const auto lightning_current = torch::tensor({0.7320898175239563, 0.24009692668914795, 0.1800716519355774}, torch::kFloat);

  const auto model_entry = checkpoint_entry(save.full, "model");
  const auto current_entry = checkpoint_entry(save.full, "current_model_state");
  REQUIRE(current_entry.defined());
  CHECK(torch::equal(model_entry, *save.average_at_save));
  CHECK(torch::equal(current_entry, *save.model_at_save));
  CHECK_FALSE(torch::equal(model_entry, current_entry));
  CHECK(checkpoint_n_averaged(save.full) == 3);
  check_close(model_entry, lightning_state_dict, 2e-7);
  check_close(current_entry, lightning_current, 2e-7);

  // volt::load_checkpoint_weights (the weights for inference) gives the averaged model.
  Linear2 loaded;
  volt::load_checkpoint_weights(loaded, save.full);
  CHECK(torch::equal(flat_parameters(loaded), *save.average_at_save));

  // Weights only: no callback changes the checkpoint (Lightning's), so it holds the model's own weights.
  CHECK(torch::equal(checkpoint_entry(save.weights_only, "model"), *save.model_at_save));
  CHECK_FALSE(checkpoint_entry(save.weights_only, "current_model_state").defined());
  CHECK(checkpoint_n_averaged(save.weights_only) == -1);

  // After fit() the model holds the average (on_train_end): a checkpoint has it in both entries.
  const auto after = dir.path / "after.ckpt";
  trainer.save_checkpoint(after);
  const auto averaged = flat(trainer.callback<volt::EMAWeightAveraging>()->averaged_parameters());
  CHECK(torch::equal(checkpoint_entry(after, "model"), averaged));
  CHECK(torch::equal(checkpoint_entry(after, "current_model_state"), averaged));
  CHECK(torch::equal(flat_parameters(*model), averaged));
  CHECK(checkpoint_n_averaged(after) == 6);
}

TEST_CASE("WeightAveraging: the best checkpoint loaded into a fresh model tests the averaged weights") {
  TempDir dir;
  auto options = volt_test::quiet_options(dir);
  options.max_epochs = 2;
  options.enable_checkpointing = true;
  options.num_sanity_val_steps = 0;
  volt::Trainer<volt::CPU> trainer(options, volt::WeightAveraging{},
                                   volt::ModelCheckpoint({.dirpath = dir.path / "checkpoints", .monitor = "weight_sum"}));
  auto model = std::make_shared<Linear2>();
  trainer.fit(model, volt_test::make_batches(3), volt_test::make_batches(1));
  const auto best = trainer.checkpoint_callback()->best_model_path();
  REQUIRE(std::filesystem::exists(best));
  // The checkpoint of the epoch whose validation (on the averaged weights) logged the smaller weight sum.
  const double best_score = *trainer.checkpoint_callback()->best_model_score();

  auto fresh = std::make_shared<Linear2>();
  volt::load_checkpoint_weights(*fresh, best);
  volt::Trainer<volt::CPU> tester(volt_test::quiet_options(dir));
  const auto metrics = tester.test(fresh, volt_test::make_batches(1));
  CHECK(metrics.at("test_weight_sum") == doctest::Approx(best_score).epsilon(1e-6));
  // The model entry (the average when that checkpoint was written) is what the fresh model got.
  CHECK(torch::equal(checkpoint_entry(best, "model"), flat_parameters(*fresh)));
  CHECK_FALSE(torch::equal(checkpoint_entry(best, "model"), checkpoint_entry(best, "current_model_state")));
}

TEST_CASE("WeightAveraging: resuming puts current_model_state in the model and the model entry in the average") {
  TempDir dir;
  auto options = volt_test::quiet_options(dir);
  options.max_epochs = 3;
  const auto checkpoint = dir.path / "mid.ckpt";
  struct Run {
    torch::Tensor weights;
    torch::Tensor average;
    std::int64_t n_averaged;
    std::vector<torch::Tensor> after_step;
  };
  auto run = [&](bool resume, const volt::WeightAveraging& averaging) {
    AveragingRecorder recorder;
    volt::Trainer<volt::CPU> trainer(options, averaging, recorder, SaveAt{1, 0, checkpoint});
    auto model = std::make_shared<Linear2>();
    trainer.fit(model, volt_test::make_batches(3), resume ? checkpoint : std::filesystem::path{});
    const auto* found = trainer.callback<volt::WeightAveraging>();
    return Run{flat_parameters(*model).clone(), flat(found->averaged_parameters()), found->n_averaged(),
               *recorder.after_step};
  };
  for (const bool use_buffers : {true, false}) {
    CAPTURE(use_buffers);
    const volt::WeightAveraging averaging({.use_buffers = use_buffers});
    const Run whole = run(false, averaging);
    volt_test::CaptureLog log;
    const Run resumed = run(true, averaging);
    CHECK(log.informed("Found current_model_state in the checkpoint. This will be used to initialize the model."));
    CHECK(torch::equal(resumed.weights, whole.weights));
    CHECK(torch::equal(resumed.average, whole.average));
    CHECK(resumed.n_averaged == whole.n_averaged);
    CHECK(whole.n_averaged == 9);
    // The resumed fit trained from the model's own weights (current_model_state, not the model entry): its
    // steps after the save (steps 5 to 9) are the uninterrupted fit's, bit for bit.
    REQUIRE(whole.after_step.size() == 9);
    REQUIRE(resumed.after_step.size() == 5);
    for (std::size_t i = 0; i < resumed.after_step.size(); ++i) {
      CHECK(torch::equal(resumed.after_step[i], whole.after_step[4 + i]));
    }
  }
}

TEST_CASE("WeightAveraging: a checkpoint of a fit without it starts the average from its weights, with Lightning's warning") {
  TempDir dir;
  auto options = volt_test::quiet_options(dir);
  options.max_epochs = 1;
  const auto checkpoint = dir.path / "plain.ckpt";
  {
    volt::Trainer<volt::CPU> plain(options, SaveAt{0, -1, checkpoint});
    auto model = std::make_shared<Linear2>();
    plain.fit(model, volt_test::make_batches(2));
  }
  options.max_epochs = 2;
  volt_test::CaptureLog log;
  AveragingRecorder recorder;
  volt::Trainer<volt::CPU> trainer(options, volt::WeightAveraging{}, recorder);
  auto model = std::make_shared<Linear2>();
  trainer.fit(model, volt_test::make_batches(2), checkpoint);
  CHECK(log.warned("The checkpoint was not created with WeightAveraging. Both the current and the average model "
                   "will be initialized with state_dict."));
  const auto* averaging = trainer.callback<volt::WeightAveraging>();
  REQUIRE(recorder.after_step->size() == 2);
  CHECK(averaging->n_averaged() == 2);
  check_close(flat(averaging->averaged_parameters()),
              ((*recorder.after_step)[0] + (*recorder.after_step)[1]) / 2.0);
}

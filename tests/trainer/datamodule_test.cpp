// volt::DataModule, overfit_batches and reload_dataloaders_every_n_epochs checked against Lightning 2.6.6: the
// order of the data module's hooks and loader calls, its state in checkpoints, its hyperparameters, the batches
// overfit_batches trains and validates on, and the epochs at which loaders are requested again.
// The expected values were recorded by running Lightning 2.6.6 (CPU, torch 2.11) with
// tests/oracle/record_datamodule.py (the tags in the comments name its lines).
#include <torch/torch.h>

#include <doctest/doctest.h>

#include "test_common.hpp"
#include "trainer/trainer_fixtures.hpp"

#include <csignal>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

using volt_test::quiet_options;
using volt_test::TempDir;

namespace {

using Events = std::shared_ptr<std::vector<std::string>>;
using Seen = std::vector<std::vector<int>>;

// Lightning's TrainerFn values, as the recording prints them.
std::string fn_name(volt::Stage stage) {
  switch (stage) {
    case volt::Stage::fitting: return "TrainerFn.FITTING";
    case volt::Stage::validating: return "TrainerFn.VALIDATING";
    case volt::Stage::testing: return "TrainerFn.TESTING";
    case volt::Stage::predicting: return "TrainerFn.PREDICTING";
    default: return "?";
  }
}

// `n` samples in batches of 2; sample i has x = [offset + i, 0], so a batch's first column names its samples
// (record_datamodule.py's dataset()).
volt_test::Batches numbered(int n, int offset = 0) {
  volt_test::Batches batches;
  for (int start = 0; start < n; start += 2) {
    auto x = torch::zeros({2, 2});
    x.index_put_({torch::indexing::Slice(), 0}, torch::arange(start, start + 2, torch::kFloat) + offset);
    batches.emplace_back(x, torch::zeros({2, 1}));
  }
  return batches;
}

std::vector<int> first_column(const torch::Tensor& x) {
  std::vector<int> values;
  for (std::int64_t i = 0; i < x.size(0); ++i) values.push_back(static_cast<int>(x[i][0].item<float>()));
  return values;
}

struct Model : torch::nn::Module {
  torch::nn::Linear linear{torch::nn::Linear(2, 1)};
  Events events = std::make_shared<std::vector<std::string>>();
  Seen train_seen, val_seen;
  Model() { register_module("linear", linear); }
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t) {
    train_seen.push_back(first_column(batch.data));
    return torch::mse_loss(linear->forward(batch.data), batch.target);
  }
  void validation_step(const torch::data::Example<>& batch, std::int64_t) { val_seen.push_back(first_column(batch.data)); }
  void test_step(const torch::data::Example<>&, std::int64_t) { events->push_back("model.test_step"); }
  torch::Tensor predict_step(const torch::data::Example<>& batch, std::int64_t) {
    events->push_back("model.predict_step");
    return batch.data;
  }
  std::shared_ptr<torch::optim::SGD> configure_optimizers() {
    return std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(0.01));
  }
};

struct HookedModel : Model {
  void on_fit_start() { events->push_back("model.on_fit_start"); }
  void on_fit_end() { events->push_back("model.on_fit_end"); }
  void on_train_start() { events->push_back("model.on_train_start"); }
  void on_train_epoch_start(volt::StepContext& ctx) {
    events->push_back("model.on_train_epoch_start(" + std::to_string(ctx.current_epoch()) + ")");
  }
  void on_validation_start() { events->push_back("model.on_validation_start"); }
};

struct Recorder {
  Events events;
  void setup(volt::TrainerState& state) { events->push_back("callback.setup(" + fn_name(state.stage) + ")"); }
  void teardown(volt::TrainerState& state) { events->push_back("callback.teardown(" + fn_name(state.stage) + ")"); }
  void on_sanity_check_start(volt::TrainerState&) { events->push_back("callback.on_sanity_check_start"); }
  void on_exception(volt::TrainerState&, const std::exception_ptr&) { events->push_back("callback.on_exception"); }
};

// record_datamodule.py's DM; `current_epoch` is the Trainer's, as Lightning's self.trainer.current_epoch.
struct DM {
  Events events;
  const volt::TrainerState* state = nullptr;
  int n_train = 8, n_val = 4;
  std::int64_t loaded = 0;
  void add(const std::string& name) { events->push_back("dm." + name); }
  std::string epoch() const { return "(" + std::to_string(state ? state->current_epoch : 0) + ")"; }

  void prepare_data() { add("prepare_data"); }
  void setup(volt::Stage stage) { add("setup(" + fn_name(stage) + ")"); }
  volt_test::Batches train_dataloader() {
    add("train_dataloader" + epoch());
    return numbered(n_train);
  }
  volt_test::Batches val_dataloader() {
    add("val_dataloader" + epoch());
    return numbered(n_val, 100);
  }
  volt_test::Batches test_dataloader() {
    add("test_dataloader");
    return numbered(4, 200);
  }
  volt_test::Batches predict_dataloader() {
    add("predict_dataloader");
    return numbered(4, 300);
  }
  void teardown(volt::Stage stage) { add("teardown(" + fn_name(stage) + ")"); }
  void state_dict(torch::serialize::OutputArchive& archive) const {
    events->push_back("dm.state_dict");
    archive.write("loaded", c10::IValue(loaded + 5));
  }
  void load_state_dict(torch::serialize::InputArchive& archive) {
    c10::IValue value;
    archive.read("loaded", value);
    loaded = value.toInt();
    add("load_state_dict(" + std::to_string(loaded) + ")");
  }
  void on_exception(const std::exception_ptr&) { add("on_exception"); }
};

static_assert(volt::DataModule<DM>);
static_assert(!volt::DataModule<volt_test::Batches>);
static_assert(!volt::DataModule<DM*>);

// Lightning's lists without what volt does not have or calls elsewhere: the model's setup and teardown hooks
// (volt has none) and configure_optimizers (volt calls it before the callbacks' setup).
std::vector<std::string> without_model_setup(std::vector<std::string> events) {
  std::erase_if(events, [](const std::string& e) {
    return e.rfind("model.setup", 0) == 0 || e.rfind("model.teardown", 0) == 0 || e == "model.configure_optimizers";
  });
  return events;
}

}  // namespace

TEST_CASE("a DataModule's hooks and loaders run in Lightning's order in fit, validate, test and predict") {
  TempDir dir;
  auto events = std::make_shared<std::vector<std::string>>();
  auto options = quiet_options(dir);
  options.max_epochs = 2;
  options.limit_train_batches = std::int64_t{2};
  options.limit_val_batches = std::int64_t{1};
  options.num_sanity_val_steps = 2;
  volt::Trainer<volt::CPU> trainer(options, Recorder{events});
  DM dm{events, &trainer.state()};
  auto model = std::make_shared<HookedModel>();
  model->events = events;
  trainer.fit(model, dm);
  // ORDER fit
  CHECK(*events == without_model_setup({
                       "dm.prepare_data", "dm.setup(TrainerFn.FITTING)", "callback.setup(TrainerFn.FITTING)",
                       "model.setup(TrainerFn.FITTING)", "model.configure_optimizers", "model.on_fit_start",
                       "callback.on_sanity_check_start", "dm.val_dataloader(0)", "model.on_validation_start",
                       "dm.train_dataloader(0)", "model.on_train_start", "model.on_train_epoch_start(0)",
                       "model.on_validation_start", "model.on_train_epoch_start(1)", "model.on_validation_start",
                       "model.on_fit_end", "dm.teardown(TrainerFn.FITTING)", "callback.teardown(TrainerFn.FITTING)",
                       "model.teardown(TrainerFn.FITTING)"}));
  CHECK(model->train_seen == Seen{{0, 1}, {2, 3}, {0, 1}, {2, 3}});
  // The sanity check runs min(num_sanity_val_steps, limit_val_batches) batches, as Lightning's.
  CHECK(model->val_seen == Seen{{100, 101}, {100, 101}, {100, 101}});

  // ORDER validate / test / predict (volt's callbacks have no setup or teardown outside fit).
  auto dm_only = [&] {
    std::vector<std::string> kept;
    for (const auto& e : *events) {
      if (e.rfind("callback.setup", 0) != 0 && e.rfind("callback.teardown", 0) != 0) kept.push_back(e);
    }
    events->clear();
    return kept;
  };
  events->clear();
  trainer.validate(model, dm);
  CHECK(dm_only() == std::vector<std::string>{"dm.prepare_data", "dm.setup(TrainerFn.VALIDATING)",
                                              "dm.val_dataloader(2)", "model.on_validation_start",
                                              "dm.teardown(TrainerFn.VALIDATING)"});
  trainer.test(model, dm);
  CHECK(dm_only() == std::vector<std::string>{"dm.prepare_data", "dm.setup(TrainerFn.TESTING)", "dm.test_dataloader",
                                              "model.test_step", "model.test_step", "dm.teardown(TrainerFn.TESTING)"});
  const auto predictions = trainer.predict(model, dm);
  CHECK(dm_only() == std::vector<std::string>{"dm.prepare_data", "dm.setup(TrainerFn.PREDICTING)",
                                              "dm.predict_dataloader", "model.predict_step", "model.predict_step",
                                              "dm.teardown(TrainerFn.PREDICTING)"});
  REQUIRE(predictions.size() == 2);
  CHECK(first_column(predictions[1]) == std::vector<int>{302, 303});
}

TEST_CASE("without a sanity check the training loader is asked first, then the validation loader") {
  TempDir dir;
  auto events = std::make_shared<std::vector<std::string>>();
  auto options = quiet_options(dir);
  options.limit_train_batches = std::int64_t{1};
  options.limit_val_batches = std::int64_t{1};
  options.num_sanity_val_steps = 0;
  volt::Trainer<volt::CPU> trainer(options, Recorder{events});
  DM dm{events, &trainer.state()};
  auto model = std::make_shared<HookedModel>();
  model->events = events;
  trainer.fit(model, dm);
  // ORDER0 fit
  CHECK(*events == without_model_setup({"dm.prepare_data", "dm.setup(TrainerFn.FITTING)",
                                        "callback.setup(TrainerFn.FITTING)", "model.setup(TrainerFn.FITTING)",
                                        "model.configure_optimizers", "model.on_fit_start", "dm.train_dataloader(0)",
                                        "dm.val_dataloader(0)", "model.on_train_start", "model.on_train_epoch_start(0)",
                                        "model.on_validation_start", "model.on_fit_end",
                                        "dm.teardown(TrainerFn.FITTING)", "callback.teardown(TrainerFn.FITTING)",
                                        "model.teardown(TrainerFn.FITTING)"}));
}

TEST_CASE("a DataModule's state is in the checkpoint under its class name and restored on resume") {
  TempDir dir;
  auto events = std::make_shared<std::vector<std::string>>();
  auto options = quiet_options(dir);
  options.limit_train_batches = std::int64_t{1};
  options.limit_val_batches = std::int64_t{0};
  const auto path = dir.path / "dm.ckpt";
  {
    volt::Trainer<volt::CPU> trainer(options);
    DM dm{events, &trainer.state()};
    auto model = std::make_shared<HookedModel>();
    trainer.fit(model, dm);
    trainer.save_checkpoint(path);
  }
  // CKPT keys / CKPT value: {'loaded': 5} under "DM".
  torch::serialize::InputArchive archive;
  volt::detail::load_archive(archive, path, torch::kCPU);
  torch::serialize::InputArchive dm_archive;
  REQUIRE(archive.try_read("DM", dm_archive));
  c10::IValue loaded;
  dm_archive.read("loaded", loaded);
  CHECK(loaded.toInt() == 5);

  events->clear();
  options.max_epochs = 2;
  volt::Trainer<volt::CPU> trainer(options);
  DM dm{events, &trainer.state()};
  auto model = std::make_shared<HookedModel>();
  model->events = events;
  trainer.fit(model, dm, path);
  // CKPT resume
  CHECK(*events == without_model_setup({"dm.prepare_data", "dm.setup(TrainerFn.FITTING)",
                                        "model.setup(TrainerFn.FITTING)", "dm.load_state_dict(5)",
                                        "model.configure_optimizers", "model.on_fit_start", "dm.train_dataloader(1)",
                                        "model.on_train_start", "model.on_train_epoch_start(1)", "model.on_fit_end",
                                        "dm.teardown(TrainerFn.FITTING)", "model.teardown(TrainerFn.FITTING)"}));
  CHECK(dm.loaded == 5);

  // A fit without a data module writes no data module state.
  trainer.fit(model, numbered(2));
  trainer.save_checkpoint(dir.path / "plain.ckpt");
  torch::serialize::InputArchive plain;
  volt::detail::load_archive(plain, dir.path / "plain.ckpt", torch::kCPU);
  torch::serialize::InputArchive none;
  CHECK_FALSE(plain.try_read("DM", none));
}

TEST_CASE("a failing fit calls the DataModule's on_exception after the callbacks' and skips its teardown") {
  struct Failing : HookedModel {
    torch::Tensor training_step(const torch::data::Example<>&, std::int64_t) { throw std::runtime_error("boom"); }
  };
  TempDir dir;
  auto events = std::make_shared<std::vector<std::string>>();
  auto options = quiet_options(dir);
  options.limit_train_batches = std::int64_t{1};
  options.num_sanity_val_steps = 0;
  volt::Trainer<volt::CPU> trainer(options, Recorder{events});
  DM dm{events, &trainer.state()};
  auto model = std::make_shared<Failing>();
  model->events = events;
  CHECK_THROWS_WITH_AS(trainer.fit(model, dm), doctest::Contains("boom"), std::runtime_error);
  // ERROR fit; volt's callbacks also get teardown after a failure (docs/differences), Lightning's do not.
  std::erase(*events, "callback.teardown(TrainerFn.FITTING)");
  CHECK(*events == without_model_setup({"dm.prepare_data", "dm.setup(TrainerFn.FITTING)",
                                        "callback.setup(TrainerFn.FITTING)", "model.setup(TrainerFn.FITTING)",
                                        "model.configure_optimizers", "model.on_fit_start", "dm.train_dataloader(0)",
                                        "dm.val_dataloader(0)", "model.on_train_start", "model.on_train_epoch_start(0)",
                                        "callback.on_exception", "dm.on_exception"}));
}

namespace {
struct TrainOnlyDM {
  volt_test::Batches train_dataloader() { return numbered(4); }
};
struct NoValidationStep : torch::nn::Module {
  torch::nn::Linear linear{torch::nn::Linear(2, 1)};
  NoValidationStep() { register_module("linear", linear); }
  torch::Tensor training_step(const torch::data::Example<>& batch) {
    return torch::mse_loss(linear->forward(batch.data), batch.target);
  }
  std::shared_ptr<torch::optim::SGD> configure_optimizers() {
    return std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(0.01));
  }
};
}  // namespace

TEST_CASE("SIGINT in a DataModule's setup is kept: the fit stops before its first batch, as interrupted") {
  struct InterruptingDM : TrainOnlyDM {
    void setup(volt::Stage) { std::raise(SIGINT); }  // the Trainer's handler only records it
  };
  struct Exceptions {
    std::shared_ptr<std::vector<std::string>> seen = std::make_shared<std::vector<std::string>>();
    void on_exception(volt::TrainerState&, const std::exception_ptr& error) {
      try {
        std::rethrow_exception(error);
      } catch (const volt::TrainingInterrupted& interrupted) {
        seen->push_back(interrupted.what());
      } catch (...) {
        seen->push_back("other");
      }
    }
  };
  TempDir dir;
  auto options = quiet_options(dir);
  options.max_epochs = 3;
  Exceptions exceptions;
  volt::Trainer<volt::CPU> trainer(options, exceptions);
  auto model = std::make_shared<Model>();
  InterruptingDM dm;
  trainer.fit(model, dm);
  CHECK(trainer.interrupted());
  CHECK(model->train_seen.empty());
  CHECK(trainer.global_step() == 0);
  REQUIRE(exceptions.seen->size() == 1);
  CHECK(exceptions.seen->front() != "other");
  CHECK(volt::detail::interrupt_handler_depth == 0);  // the handlers are gone again

  // Without a data module nothing is installed before the fit: a fit after the interrupted one starts afresh.
  auto again = std::make_shared<Model>();
  volt::Trainer<volt::CPU> next(options);
  auto batches = numbered(4);  // 2 batches
  next.fit(again, batches);
  CHECK_FALSE(next.interrupted());
  CHECK(again->train_seen.size() == 6);
}

TEST_CASE("an inner ScopedInterruptHandler keeps a signal that arrived under the outer one") {
  {
    volt::detail::ScopedInterruptHandler outer(true);
    std::raise(SIGTERM);
    CHECK(volt::detail::interrupt_signal == SIGTERM);
    {
      volt::detail::ScopedInterruptHandler inner(true);
      CHECK(volt::detail::interrupt_signal == SIGTERM);
      CHECK(volt::detail::interrupt_handler_depth == 1);
    }
    // The outer handler is still the one installed (SA_RESETHAND reset it on delivery: install a new one to
    // catch a second signal).
    CHECK(volt::detail::interrupt_handler_depth == 1);
  }
  CHECK(volt::detail::interrupt_handler_depth == 0);
  volt::detail::ScopedInterruptHandler fresh(true);
  CHECK(volt::detail::interrupt_signal == 0);  // a new outermost handler starts clean
}

TEST_CASE("fit with a DataModule warns, as Lightning, when validation data or validation_step is missing") {
  TempDir dir;
  auto options = quiet_options(dir);
  options.limit_train_batches = std::int64_t{1};
  volt::Trainer<volt::CPU> trainer(options);
  {
    // MSG fit train only
    volt_test::CaptureLog log;
    auto model = std::make_shared<Model>();
    TrainOnlyDM dm;
    trainer.fit(model, dm);
    CHECK(log.warned("You defined a `validation_step` but have no `val_dataloader`. Skipping val loop."));
    CHECK(model->val_seen.empty());
  }
  {
    // MSG fit no validation_step
    volt_test::CaptureLog log;
    auto model = std::make_shared<NoValidationStep>();
    auto events = std::make_shared<std::vector<std::string>>();
    DM dm{events};
    trainer.fit(model, dm);
    CHECK(log.warned("You passed in a `val_dataloader` but have no `validation_step`. Skipping val loop."));
    CHECK(std::count(events->begin(), events->end(), "dm.val_dataloader(0)") == 0);
  }
}

namespace {
struct Captured : volt::Logger {
  std::vector<std::map<std::string, std::string>> hparams;
  void log_metrics(const std::map<std::string, double>&, std::int64_t) override {}
  void log_hyperparams(const std::map<std::string, std::string>& params) override { hparams.push_back(params); }
  std::filesystem::path log_dir() const override { return "."; }
};
struct HModel : Model {
  std::string batch_size = "2";
  std::map<std::string, std::string> hparams() { return {{"lr", "0.1"}, {"batch_size", batch_size}}; }
};
struct HDM : TrainOnlyDM {
  std::string batch_size = "2";
  std::map<std::string, std::string> hparams() { return {{"batch_size", batch_size}, {"workers", "3"}}; }
};
}  // namespace

TEST_CASE("a DataModule's hparams are logged with the model's; a key with two values is Lightning's error") {
  TempDir dir;
  auto options = quiet_options(dir);
  options.limit_train_batches = std::int64_t{1};
  options.logger = true;
  auto logger = std::make_shared<Captured>();
  volt::Trainer<volt::CPU> trainer(options, logger);
  auto model = std::make_shared<HModel>();
  HDM dm;
  trainer.fit(model, dm);
  // HPARAMS merged: batch_size, lr, workers (volt adds accelerator, precision, strategy).
  REQUIRE(logger->hparams.size() == 1);
  const auto& logged = logger->hparams[0];
  CHECK(logged.at("batch_size") == "2");
  CHECK(logged.at("lr") == "0.1");
  CHECK(logged.at("workers") == "3");
  CHECK(logged.at("accelerator") == "cpu");
  // HPARAMS conflict
  model->batch_size = "4";
  CHECK_THROWS_WITH_AS(trainer.fit(model, dm),
                       "Error while merging hparams: the keys ['batch_size'] are present in both the LightningModule's "
                       "and LightningDataModule's hparams but have different values.",
                       std::runtime_error);
}

namespace {
// DM(n_train=10, n_val=6) of record_datamodule.py's overfit().
struct OverfitDM {
  volt_test::Batches train_dataloader() { return numbered(10); }
  volt_test::Batches val_dataloader() { return numbered(6, 100); }
};

Seen repeat(const Seen& epoch, int times) {
  Seen all;
  for (int i = 0; i < times; ++i) all.insert(all.end(), epoch.begin(), epoch.end());
  return all;
}

std::shared_ptr<Model> overfit_fit(volt::TrainerOptions options) {
  volt::Trainer<volt::CPU> trainer(options);
  auto model = std::make_shared<Model>();
  OverfitDM dm;
  trainer.fit(model, dm);
  return model;
}
}  // namespace

TEST_CASE("overfit_batches trains and validates on Lightning's batches and replaces the train and val limits") {
  TempDir dir;
  auto base = quiet_options(dir);
  base.max_epochs = 2;
  base.num_sanity_val_steps = 0;
  const Seen first_two{{0, 1}, {2, 3}};
  const Seen val_two{{100, 101}, {102, 103}};
  {
    // OVERFIT count
    auto options = base;
    options.overfit_batches = 2;
    volt::Trainer<volt::CPU> trainer(options);
    CHECK(trainer.options().limit_train_batches.count() == 2);
    CHECK(trainer.options().limit_val_batches.count() == 2);
    CHECK(trainer.options().limit_test_batches.is_whole_epoch());
    auto model = overfit_fit(options);
    CHECK(model->train_seen == repeat(first_two, 2));
    CHECK(model->val_seen == repeat(val_two, 2));
  }
  {
    // OVERFIT fraction: 0.5 of 5 training batches, 0.5 of 3 validation batches.
    auto options = base;
    options.overfit_batches = 0.5;
    auto model = overfit_fit(options);
    CHECK(model->train_seen == repeat(first_two, 2));
    CHECK(model->val_seen == repeat({{100, 101}}, 2));
  }
  {
    // OVERFIT with limits: overfit_batches wins over limit_train_batches and limit_val_batches.
    auto options = base;
    options.overfit_batches = 2;
    options.limit_train_batches = 4;
    options.limit_val_batches = 3;
    options.limit_test_batches = 1;
    volt::Trainer<volt::CPU> trainer(options);
    CHECK(trainer.options().limit_train_batches.count() == 2);
    CHECK(trainer.options().limit_val_batches.count() == 2);
    CHECK(trainer.options().limit_test_batches.count() == 1);
    auto model = overfit_fit(options);
    CHECK(model->train_seen == repeat(first_two, 2));
    CHECK(model->val_seen == repeat(val_two, 2));
  }
  {
    // OVERFIT fast_dev_run: 2 steps over the overfit limit of 3; the epoch stops before its end, no validation.
    auto options = base;
    options.overfit_batches = 3;
    options.fast_dev_run = 2;
    auto model = overfit_fit(options);
    CHECK(model->train_seen == first_two);
    CHECK(model->val_seen.empty());
  }
  {
    // OVERFIT sanity: the sanity check runs min(num_sanity_val_steps, the val limit) batches.
    auto options = base;
    options.overfit_batches = 1;
    options.num_sanity_val_steps = 2;
    auto model = overfit_fit(options);
    CHECK(model->train_seen == repeat({{0, 1}}, 2));
    CHECK(model->val_seen == repeat({{100, 101}}, 3));
  }
  // OVERFIT bad / OVERFIT negative
  auto bad = base;
  bad.overfit_batches = 1.5;
  CHECK_THROWS_WITH_AS([&] { volt::Trainer<volt::CPU> trainer(bad); }(),
                       "You have passed invalid value 1.5 for overfit_batches, it has to be in [0.0, 1.0] or an int.",
                       volt::MisconfigurationError);
  bad.overfit_batches = -1;
  CHECK_THROWS_WITH_AS([&] { volt::Trainer<volt::CPU> trainer(bad); }(),
                       "You have passed invalid value -1 for overfit_batches, it has to be in [0.0, 1.0] or an int.",
                       volt::MisconfigurationError);
}

namespace {
// Samples numbered as in numbered(), for torch::data loaders.
struct NumberedDataset : torch::data::datasets::Dataset<NumberedDataset> {
  int n, offset;
  NumberedDataset(int count, int first) : n(count), offset(first) {}
  torch::data::Example<> get(std::size_t index) override {
    auto x = torch::zeros({2});
    x[0] = static_cast<float>(offset + static_cast<int>(index));
    return {x, torch::zeros({1})};
  }
  torch::optional<std::size_t> size() const override { return static_cast<std::size_t>(n); }
};
struct ShuffledDM {
  auto train_dataloader() {
    return torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
        NumberedDataset(10, 0).map(torch::data::transforms::Stack<>()), torch::data::DataLoaderOptions(2));
  }
  auto val_dataloader() {
    return torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
        NumberedDataset(6, 100).map(torch::data::transforms::Stack<>()), torch::data::DataLoaderOptions(2));
  }
};
}  // namespace

TEST_CASE("overfit_batches on shuffling loaders warns as Lightning and yields the same batches every epoch") {
  TempDir dir;
  auto options = quiet_options(dir);
  options.max_epochs = 3;
  options.num_sanity_val_steps = 0;
  options.overfit_batches = 2;
  volt_test::CaptureLog log;
  volt::Trainer<volt::CPU> trainer(options);
  auto model = std::make_shared<Model>();
  ShuffledDM dm;
  torch::manual_seed(3);
  trainer.fit(model, dm);
  torch::manual_seed(4);
  // OVERFIT shuffled
  CHECK(log.warned("You requested to overfit but enabled train dataloader shuffling. We are turning off the train "
                   "dataloader shuffling for you."));
  CHECK(log.warned("You requested to overfit but enabled val dataloader shuffling. We are turning off the val "
                   "dataloader shuffling for you."));
  REQUIRE(model->train_seen.size() == 6);
  REQUIRE(model->val_seen.size() == 6);
  for (std::size_t i = 2; i < 6; ++i) {
    CHECK(model->train_seen[i] == model->train_seen[i % 2]);
    CHECK(model->val_seen[i] == model->val_seen[i % 2]);
  }
  // Without overfit_batches the loader shuffles each epoch anew (a check that the test can fail).
  options.overfit_batches = 0;
  options.limit_train_batches = 2;
  volt::Trainer<volt::CPU> plain(options);
  auto shuffled = std::make_shared<Model>();
  plain.fit(shuffled, dm);
  const bool same = shuffled->train_seen[0] == shuffled->train_seen[2] && shuffled->train_seen[0] == shuffled->train_seen[4] &&
                    shuffled->train_seen[1] == shuffled->train_seen[3] && shuffled->train_seen[1] == shuffled->train_seen[5];
  CHECK_FALSE(same);
}

namespace {
struct ReloadCase {
  std::int64_t every_n_epochs;
  std::int64_t check_val_every_n_epoch;
  std::int64_t sanity;
  double limit_val;
  std::vector<std::int64_t> train_epochs;
  std::vector<std::int64_t> val_epochs;
};

// The epoch each loader request saw, for `events` of a DM.
std::vector<std::int64_t> request_epochs(const std::vector<std::string>& events, const std::string& loader) {
  std::vector<std::int64_t> epochs;
  for (const auto& e : events) {
    if (e.rfind("dm." + loader + "(", 0) == 0) epochs.push_back(std::stoll(e.substr(loader.size() + 4)));
  }
  return epochs;
}
}  // namespace

TEST_CASE("reload_dataloaders_every_n_epochs asks a DataModule for its loaders at Lightning's epochs") {
  // RELOAD n=... every=... sanity=... limit_val=...: 5 epochs, limit_train_batches=2.
  const std::vector<ReloadCase> cases{
      {0, 1, 0, 1.0, {0}, {0}},
      {0, 1, 2, 1.0, {0}, {0}},
      {0, 2, 0, 1.0, {0}, {1}},
      {0, 2, 2, 1.0, {0}, {0}},
      {1, 1, 0, 1.0, {0, 1, 2, 3, 4}, {0, 1, 2, 3, 4}},
      {1, 1, 2, 1.0, {0, 1, 2, 3, 4}, {0, 1, 2, 3, 4}},
      {1, 2, 0, 1.0, {0, 1, 2, 3, 4}, {1, 3}},
      {1, 2, 2, 1.0, {0, 1, 2, 3, 4}, {0, 1, 3}},
      {2, 1, 0, 1.0, {0, 2, 4}, {0, 2, 4}},
      {2, 1, 2, 1.0, {0, 2, 4}, {0, 2, 4}},
      {2, 2, 0, 1.0, {0, 2, 4}, {1, 3}},
      {2, 2, 2, 1.0, {0, 2, 4}, {0, 1, 3}},
      {3, 1, 0, 1.0, {0, 3}, {0, 3}},
      {3, 1, 2, 1.0, {0, 3}, {0, 3}},
      {3, 2, 0, 1.0, {0, 3}, {1}},
      {3, 2, 2, 1.0, {0, 3}, {0, 1}},
      {1, 1, 2, 0.0, {0, 1, 2, 3, 4}, {}},
  };
  TempDir dir;
  for (const auto& c : cases) {
    CAPTURE(c.every_n_epochs);
    CAPTURE(c.check_val_every_n_epoch);
    CAPTURE(c.sanity);
    CAPTURE(c.limit_val);
    auto options = quiet_options(dir);
    options.max_epochs = 5;
    options.limit_train_batches = std::int64_t{2};
    options.limit_val_batches = c.limit_val;
    options.num_sanity_val_steps = c.sanity;
    options.check_val_every_n_epoch = c.check_val_every_n_epoch;
    options.reload_dataloaders_every_n_epochs = c.every_n_epochs;
    volt::Trainer<volt::CPU> trainer(options);
    auto events = std::make_shared<std::vector<std::string>>();
    DM dm{events, &trainer.state()};
    auto model = std::make_shared<Model>();
    trainer.fit(model, dm);
    CHECK(request_epochs(*events, "train_dataloader") == c.train_epochs);
    CHECK(request_epochs(*events, "val_dataloader") == c.val_epochs);
    CHECK(model->train_seen.size() == 10);
  }
  // RELOAD bad
  TempDir other;
  auto bad = quiet_options(other);
  bad.reload_dataloaders_every_n_epochs = -1;
  CHECK_THROWS_WITH_AS([&] { volt::Trainer<volt::CPU> trainer(bad); }(),
                       "`reload_dataloaders_every_n_epochs` should be an int >= 0, got -1.", volt::MisconfigurationError);
}

TEST_CASE("loader factories given to fit are asked again as reload_dataloaders_every_n_epochs says") {
  TempDir dir;
  auto options = quiet_options(dir);
  options.max_epochs = 5;
  options.num_sanity_val_steps = 2;
  options.check_val_every_n_epoch = 2;
  options.reload_dataloaders_every_n_epochs = 2;
  volt::Trainer<volt::CPU> trainer(options);
  std::vector<std::int64_t> train_calls, val_calls;
  // Each request gives a loader of one more batch: the epochs train on what the last request returned.
  auto train = [&] {
    train_calls.push_back(trainer.current_epoch());
    return numbered(2 * static_cast<int>(train_calls.size()));
  };
  auto val = [&] {
    val_calls.push_back(trainer.current_epoch());
    return numbered(2, 100);
  };
  auto model = std::make_shared<Model>();
  trainer.fit(model, train, val);
  // RELOAD n=2 every=2 sanity=2: train at epochs 0, 2, 4; val at 0, 1, 3.
  CHECK(train_calls == std::vector<std::int64_t>{0, 2, 4});
  CHECK(val_calls == std::vector<std::int64_t>{0, 1, 3});
  CHECK(model->train_seen.size() == 1 + 1 + 2 + 2 + 3);
  CHECK(trainer.state().num_training_batches == 3);

  // A factory may return a reference to a loader it keeps; the Trainer then iterates that loader.
  volt_test::Batches kept = numbered(4, 50);
  int requests = 0;
  auto by_reference = [&]() -> volt_test::Batches& {
    ++requests;
    return kept;
  };
  auto again = std::make_shared<Model>();
  trainer.fit(again, by_reference);
  CHECK(requests == 3);  // epochs 0, 2, 4
  CHECK(again->train_seen.front() == std::vector<int>{50, 51});
  CHECK(again->train_seen.size() == 10);

  // validate, test and predict ask a factory once per call.
  requests = 0;
  trainer.validate(again, by_reference);
  CHECK(requests == 1);
  CHECK(again->val_seen.size() == 2);
  CHECK(trainer.predict(again, by_reference).size() == 2);
  CHECK(requests == 2);
}

TEST_CASE("the batch-size finder takes a DataModule built for each batch size") {
  TempDir dir;
  auto options = quiet_options(dir);
  std::vector<std::int64_t> sizes;
  struct SizedDM {
    std::int64_t batch_size;
    int* val_requests;
    volt_test::Batches train_dataloader() {
      if (batch_size > 8) {
        throw c10::OutOfMemoryError(c10::SourceLocation{"volt_test", __FILE__, static_cast<std::uint32_t>(__LINE__)}, "CUDA out of memory (test)");
      }
      return volt_test::make_batches(4);
    }
    volt_test::Batches val_dataloader() {
      ++*val_requests;
      return volt_test::make_batches(1);
    }
  };
  int val_requests = 0;
  const auto found = volt::scale_batch_size<volt::CPU, volt::SingleDevice, volt::FP32>(
      options, [] { return std::make_shared<volt_test::Regressor>(); },
      [&](std::int64_t batch_size) {
        sizes.push_back(batch_size);
        return SizedDM{batch_size, &val_requests};
      },
      {.steps_per_trial = 1, .init_val = 2});
  CHECK(found.batch_size == 8);
  CHECK(sizes == std::vector<std::int64_t>{2, 4, 8, 16});
  CHECK(val_requests == 0);  // trials do not validate
}

namespace {
// The strategy's rank answers and its agreement step, as prepare_datamodule sees them on one rank of a run.
struct FakeRanks {
  int local = 0, node = 0;
  int agreements = 0;
  int local_rank() const { return local; }
  int node_rank() const { return node; }
  template <class Work, class PeerError>
  void run_and_agree(Work&& work, PeerError&&) {
    ++agreements;
    work();
  }
};
struct Preparing {
  int prepared = 0;
  void prepare_data() { ++prepared; }
  volt_test::Batches train_dataloader() { return {}; }
};
struct PreparingOnce : Preparing {
  static constexpr bool prepare_data_per_node = false;
};
}  // namespace

TEST_CASE("prepare_data runs on local rank 0 of each node, or on global rank 0 without prepare_data_per_node") {
  // Lightning's DataConnector.prepare_data: every rank takes part in the barrier, only one per node (or one
  // per run) prepares.
  for (const auto& [local, node, per_node, once] :
       std::vector<std::tuple<int, int, int, int>>{{0, 0, 1, 1}, {1, 0, 0, 0}, {0, 1, 1, 0}, {1, 1, 0, 0}}) {
    CAPTURE(local);
    CAPTURE(node);
    FakeRanks ranks{local, node};
    Preparing per_node_dm;
    volt::detail::prepare_datamodule(ranks, per_node_dm);
    CHECK(per_node_dm.prepared == per_node);
    PreparingOnce once_dm;
    volt::detail::prepare_datamodule(ranks, once_dm);
    CHECK(once_dm.prepared == once);
    CHECK(ranks.agreements == 2);
  }
}

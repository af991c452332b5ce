#include "test_common.hpp"

#include "trainer/trainer_fixtures.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

using volt_test::Batches;
using volt_test::Regressor;
using volt_test::TempDir;
using volt_test::quiet_options;

TEST_CASE("accumulate_grad_batches steps at window ends and on the last batch (Lightning's counts)") {
  // Lightning: 5 batches, k=2 -> steps after batches 1, 3, 4 (global_step 3); k=3 -> after 2 and 4.
  for (const auto& [k, expected_steps] :
       std::vector<std::pair<int, std::vector<std::int64_t>>>{{1, {0, 1, 2, 3, 4}}, {2, {1, 3, 4}}, {3, {2, 4}}}) {
    TempDir dir;
    auto model = std::make_shared<Regressor>();
    auto options = quiet_options(dir);
    options.max_epochs = 1;
    options.accumulate_grad_batches = k;
    volt_test::StepRecorder recorder;
    volt::Trainer<volt::CPU> trainer(options, recorder.callback());
    trainer.fit(model, volt_test::make_batches(5));
    CHECK(trainer.global_step() == static_cast<std::int64_t>(expected_steps.size()));
    CHECK(*recorder.steps_at_batch == expected_steps);
  }
}

TEST_CASE("zero_grad runs at the start of each accumulation window, so gradients accumulate inside it") {
  TempDir dir;
  auto model = std::make_shared<Regressor>();
  auto options = quiet_options(dir);
  options.max_epochs = 1;
  options.accumulate_grad_batches = 2;
  volt_test::StepRecorder recorder;
  volt::Trainer<volt::CPU> trainer(options, recorder.callback());
  // Two identical batches: the accumulated gradient of the window equals the full gradient of one batch
  // (each micro-batch loss is divided by k=2).
  auto one = volt_test::make_batches(1);
  Batches data{one[0], one[0]};
  auto probe = std::make_shared<Regressor>();
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < model->parameters().size(); ++i) probe->parameters()[i].copy_(model->parameters()[i]);
  {
    torch::AutoGradMode enable(true);
    torch::mse_loss(probe->forward(one[0].data), one[0].target).backward();
  }
  torch::AutoGradMode enable(true);
  trainer.fit(model, data);
  REQUIRE(recorder.grads_before_step->size() == 1);
  CHECK(torch::allclose(recorder.grads_before_step->front(), probe->linear->weight.grad(), 1e-6, 1e-7));
}

TEST_CASE("max_steps and max_epochs end fit with Lightning's message") {
  TempDir dir;
  {
    auto model = std::make_shared<Regressor>();
    auto options = quiet_options(dir);
    options.max_steps = 7;
    options.max_epochs = -1;
    volt::Trainer<volt::CPU> trainer(options);
    volt_test::CaptureLog log;
    trainer.fit(model, volt_test::make_batches(5));
    CHECK(trainer.global_step() == 7);
    CHECK(trainer.current_epoch() == 2);  // the interrupted epoch counts as finished, as in Lightning
    CHECK(log.informed("`Trainer.fit` stopped: `max_steps=7` reached."));
  }
  {
    auto model = std::make_shared<Regressor>();
    auto options = quiet_options(dir);
    options.max_epochs = 3;
    volt::Trainer<volt::CPU> trainer(options);
    volt_test::CaptureLog log;
    trainer.fit(model, volt_test::make_batches(5));
    CHECK(trainer.global_step() == 15);
    CHECK(trainer.current_epoch() == 3);
    CHECK(log.informed("`Trainer.fit` stopped: `max_epochs=3` reached."));
  }
  {
    auto model = std::make_shared<Regressor>();
    auto options = quiet_options(dir);
    options.max_epochs.reset();
    options.max_steps = -1;
    options.limit_train_batches = 1;
    volt::Trainer<volt::CPU> trainer(options);
    volt_test::CaptureLog log;
    trainer.fit(model, volt_test::make_batches(1));
    CHECK(log.warned("`max_epochs` was not set. Setting it to 1000 epochs. To train without an epoch limit, set "
                     "`max_epochs=-1`."));
    CHECK(trainer.current_epoch() == 1000);
  }
}

TEST_CASE("invalid options are rejected with Lightning's messages") {
  auto message_of = [](volt::TrainerOptions options) -> std::string {
    try {
      volt::Trainer<volt::CPU> trainer(options);
    } catch (const volt::MisconfigurationError& error) {
      return error.what();
    }
    return "no error";
  };
  volt::TrainerOptions base{.enable_progress_bar = false, .enable_checkpointing = false,
                            .enable_model_summary = false, .logger = false};
  auto with = [&](auto change) {
    auto options = base;
    change(options);
    return message_of(options);
  };
  CHECK(with([](auto& o) { o.num_nodes = 0; }) == "`num_nodes` must be a positive integer, but got 0.");
  CHECK(with([](auto& o) { o.max_epochs = -2; }) ==
        "`max_epochs` must be a non-negative integer or -1. You passed in -2.");
  CHECK(with([](auto& o) { o.limit_train_batches = 1.5; }) ==
        "You have passed invalid value 1.5 for limit_train_batches, it has to be in [0.0, 1.0] or an int.");
  CHECK(with([](auto& o) { o.limit_val_batches = -1; }) ==
        "You have passed invalid value -1 for limit_val_batches, it has to be in [0.0, 1.0] or an int.");
  CHECK(with([](auto& o) { o.fast_dev_run = -1; }) ==
        "fast_dev_run=-1 is not a valid configuration. It should be >= 0.");
  CHECK(with([](auto& o) { o.accumulate_grad_batches = 0; }).find("accumulate_grad_batches") != std::string::npos);
  CHECK(with([](auto& o) {
          o.check_val_every_n_epoch.reset();
          o.val_check_interval = 0.5;
        }).find("`val_check_interval` should be an integer") != std::string::npos);
  CHECK(with([](auto& o) { o.devices = 2; }).find("volt::SingleDevice trains on exactly one device") !=
        std::string::npos);
  CHECK(with([](auto&) {}) == "no error");
}

TEST_CASE("Trainer<CPU, SingleDevice, FP32> ends bit-identical to a hand-written LibTorch loop") {
  // Same op order: the hand loop calls torch::optim::Adam::step, so the Trainer steps parameter by parameter
  // too (by default it uses volt's multi-tensor or fused Adam, equal within float rounding: tests/optim).
  volt::optim::ScopedDefaultImplementation same_order(volt::optim::Implementation::per_parameter);
  constexpr int steps = 100;
  auto data = volt_test::make_classification_batches(20, 16);
  torch::manual_seed(7);
  auto hand = std::make_shared<volt_test::PlainClassifier>();
  torch::manual_seed(7);
  auto model = std::make_shared<volt_test::PlainClassifier>();
  // Same initial weights by construction from the same seed.
  for (std::size_t i = 0; i < hand->parameters().size(); ++i) {
    REQUIRE(torch::equal(hand->parameters()[i], model->parameters()[i]));
  }
  {
    torch::optim::Adam optimizer(hand->parameters(), torch::optim::AdamOptions(1e-2));
    hand->train();
    torch::manual_seed(11);
    int step = 0;
    for (int epoch = 0; step < steps; ++epoch) {
      for (auto& batch : data) {
        if (step == steps) break;
        optimizer.zero_grad();
        auto loss = torch::nn::functional::cross_entropy(hand->forward(batch.data), batch.target);
        loss.backward();
        optimizer.step();
        ++step;
      }
    }
  }
  TempDir dir;
  auto options = quiet_options(dir);
  options.max_steps = steps;
  options.max_epochs = -1;
  volt::Trainer<volt::CPU> trainer(options);
  torch::manual_seed(11);
  trainer.fit(model, data);
  CHECK(trainer.global_step() == steps);
  for (std::size_t i = 0; i < hand->parameters().size(); ++i) {
    CHECK(torch::equal(hand->parameters()[i], model->parameters()[i]));
  }
}

TEST_CASE("validation runs on val_check_interval batches, every n epochs, after a 2-batch sanity check") {
  TempDir dir;
  SUBCASE("an int interval validates every N training batches") {
    auto model = std::make_shared<volt_test::CountingModel>();
    auto options = quiet_options(dir);
    options.max_epochs = 1;
    options.val_check_interval = 2;
    volt::Trainer<volt::CPU> trainer(options);
    trainer.fit(model, volt_test::make_batches(5), volt_test::make_batches(3));
    // Sanity check: 2 batches; then after training batches 1 and 3 a full pass of 3.
    CHECK(model->validation_batches == 2 + 2 * 3);
    CHECK(model->validation_runs_at_batch == std::vector<std::int64_t>{-1, 1, 3});
  }
  SUBCASE("a fraction validates at that share of the epoch") {
    auto model = std::make_shared<volt_test::CountingModel>();
    auto options = quiet_options(dir);
    options.max_epochs = 1;
    options.val_check_interval = 0.5;
    options.num_sanity_val_steps = 0;
    volt::Trainer<volt::CPU> trainer(options);
    trainer.fit(model, volt_test::make_batches(4), volt_test::make_batches(1));
    CHECK(model->validation_runs_at_batch == std::vector<std::int64_t>{1, 3});
  }
  SUBCASE("check_val_every_n_epoch") {
    auto model = std::make_shared<volt_test::CountingModel>();
    auto options = quiet_options(dir);
    options.max_epochs = 4;
    options.check_val_every_n_epoch = 2;
    options.num_sanity_val_steps = 0;
    volt::Trainer<volt::CPU> trainer(options);
    trainer.fit(model, volt_test::make_batches(2), volt_test::make_batches(1));
    CHECK(model->validation_epochs == std::vector<std::int64_t>{1, 3});
  }
  SUBCASE("limit_val_batches and num_sanity_val_steps=0") {
    auto model = std::make_shared<volt_test::CountingModel>();
    auto options = quiet_options(dir);
    options.max_epochs = 2;
    options.limit_val_batches = 2;
    options.num_sanity_val_steps = 0;
    volt::Trainer<volt::CPU> trainer(options);
    trainer.fit(model, volt_test::make_batches(2), volt_test::make_batches(5));
    CHECK(model->validation_batches == 4);
  }
  SUBCASE("the model is in eval mode without autograd during validation, back in train mode after") {
    auto model = std::make_shared<volt_test::CountingModel>();
    auto options = quiet_options(dir);
    options.max_epochs = 1;
    volt::Trainer<volt::CPU> trainer(options);
    trainer.fit(model, volt_test::make_batches(2), volt_test::make_batches(2));
    CHECK(model->saw_training_in_validation == false);
    CHECK(model->saw_grad_mode_in_validation == false);
    CHECK(model->is_training());
  }
}

TEST_CASE("logged metrics: step values in training, epoch means in validation") {
  TempDir dir;
  auto model = std::make_shared<volt_test::CountingModel>();
  auto options = quiet_options(dir);
  options.max_epochs = 1;
  options.num_sanity_val_steps = 0;
  volt::Trainer<volt::CPU> trainer(options);
  trainer.fit(model, volt_test::make_batches(3), volt_test::make_batches(4));
  auto metrics = trainer.callback_metrics();
  // validation_step logs the batch index: mean over 0..3 is 1.5.
  REQUIRE(metrics.count("val_index"));
  CHECK(metrics["val_index"] == doctest::Approx(1.5));
  // training_step logs "batch_value" = batch_idx * 10 on step and on epoch: both keys exist.
  CHECK(metrics["batch_value_step"] == doctest::Approx(20.0));
  CHECK(metrics["batch_value_epoch"] == doctest::Approx(10.0));
  CHECK(metrics["batch_value"] == doctest::Approx(10.0));
}

TEST_CASE("EarlyStopping stops after `patience` checks without improvement") {
  TempDir dir;
  auto model = std::make_shared<volt_test::CountingModel>();
  model->constant_val_metric = true;
  auto options = quiet_options(dir);
  options.max_epochs = 10;
  options.num_sanity_val_steps = 0;
  volt::Trainer<volt::CPU> trainer(options, volt::EarlyStopping{{.monitor = "val_constant", .patience = 2}});
  volt_test::CaptureLog log;
  trainer.fit(model, volt_test::make_batches(2), volt_test::make_batches(1));
  auto* early = trainer.callback<volt::EarlyStopping>();
  REQUIRE(early != nullptr);
  CHECK(early->stopped_epoch() == 2);
  CHECK(trainer.current_epoch() == 3);
  CHECK(log.informed("Monitored metric val_constant did not improve in the last 2 records. Best score: 1.000. "
                     "Signaling Trainer to stop."));
}

TEST_CASE("EarlyStopping: missing metric, bad mode, thresholds and non-finite values") {
  CHECK_THROWS_WITH_AS(volt::EarlyStopping({.monitor = "x", .mode = "avg"}), "`mode` can be min, max, got avg",
                       volt::MisconfigurationError);
  TempDir dir;
  {
    auto model = std::make_shared<volt_test::CountingModel>();
    auto options = quiet_options(dir);
    options.max_epochs = 2;
    options.num_sanity_val_steps = 0;
    volt::Trainer<volt::CPU> trainer(options, volt::EarlyStopping{{.monitor = "nope"}});
    VOLT_CHECK_THROWS_CONTAINS(trainer.fit(model, volt_test::make_batches(2), volt_test::make_batches(1)),
                               std::runtime_error,
                               "Early stopping conditioned on metric `nope` which is not available. Pass in or "
                               "modify your `EarlyStopping` callback to use any of the following: `");
  }
  {
    auto model = std::make_shared<volt_test::CountingModel>();
    auto options = quiet_options(dir);
    options.max_epochs = 10;
    options.num_sanity_val_steps = 0;
    // val_index mean is 0.5 with two validation batches: below the stopping threshold 1.0 in "min" mode.
    volt::Trainer<volt::CPU> trainer(options,
                                     volt::EarlyStopping{{.monitor = "val_index", .stopping_threshold = 1.0}});
    trainer.fit(model, volt_test::make_batches(2), volt_test::make_batches(2));
    CHECK(trainer.current_epoch() == 1);
    CHECK(trainer.callback<volt::EarlyStopping>()->stopping_reason().starts_with("Stopping threshold reached"));
  }
  {
    auto model = std::make_shared<volt_test::CountingModel>();
    model->nan_val_metric = true;
    auto options = quiet_options(dir);
    options.max_epochs = 10;
    options.num_sanity_val_steps = 0;
    volt::Trainer<volt::CPU> trainer(options, volt::EarlyStopping{{.monitor = "val_constant"}});
    trainer.fit(model, volt_test::make_batches(2), volt_test::make_batches(1));
    CHECK(trainer.current_epoch() == 1);
    CHECK(trainer.callback<volt::EarlyStopping>()->stopping_reason().find("is not finite") != std::string::npos);
  }
}

TEST_CASE("min_epochs keeps training although a callback asks to stop") {
  TempDir dir;
  auto model = std::make_shared<volt_test::CountingModel>();
  model->constant_val_metric = true;
  auto options = quiet_options(dir);
  options.max_epochs = 10;
  options.min_epochs = 5;
  options.num_sanity_val_steps = 0;
  volt::Trainer<volt::CPU> trainer(options, volt::EarlyStopping{{.monitor = "val_constant", .patience = 1}});
  trainer.fit(model, volt_test::make_batches(1), volt_test::make_batches(1));
  CHECK(trainer.current_epoch() == 5);
}

TEST_CASE("ModelCheckpoint keeps the top k by the monitored metric with Lightning's file names") {
  TempDir dir;
  auto model = std::make_shared<volt_test::CountingModel>();
  model->val_metric_by_epoch = {1.0, 3.0, 2.0, 4.0};
  auto options = quiet_options(dir);
  options.max_epochs = 4;
  options.num_sanity_val_steps = 0;
  options.enable_checkpointing = true;
  volt::Trainer<volt::CPU> trainer(
      options, volt::ModelCheckpoint{{.dirpath = dir.path / "ckpt", .monitor = "val_score", .mode = "max",
                                      .save_top_k = 2, .save_last = true}});
  trainer.fit(model, volt_test::make_batches(5), volt_test::make_batches(1));
  std::set<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path / "ckpt")) {
    files.insert(entry.path().filename().string());
  }
  CHECK(files == std::set<std::string>{"epoch=1-step=10.ckpt", "epoch=3-step=20.ckpt", "last.ckpt"});
  auto* checkpoint = trainer.checkpoint_callback();
  REQUIRE(checkpoint != nullptr);
  CHECK(checkpoint->best_model_path().filename() == "epoch=3-step=20.ckpt");
  CHECK(checkpoint->best_model_score() == doctest::Approx(4.0));
}

TEST_CASE("ModelCheckpoint without monitor keeps only the latest; validation of its options") {
  TempDir dir;
  auto model = std::make_shared<Regressor>();
  auto options = quiet_options(dir);
  options.max_epochs = 3;
  options.enable_checkpointing = true;
  volt::Trainer<volt::CPU> trainer(options, volt::ModelCheckpoint{{.dirpath = dir.path / "c"}});
  trainer.fit(model, volt_test::make_batches(2));
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path / "c")) {
    files.push_back(entry.path().filename().string());
  }
  CHECK(files == std::vector<std::string>{"epoch=2-step=6.ckpt"});

  CHECK_THROWS_WITH_AS(volt::ModelCheckpoint({.save_top_k = -2}), "Invalid value for save_top_k=-2. Must be >= -1",
                       volt::MisconfigurationError);
  CHECK_THROWS_WITH_AS(volt::ModelCheckpoint({.save_top_k = 3}),
                       "ModelCheckpoint(save_top_k=3, monitor=None) is not a valid configuration. No quantity for "
                       "top_k to track.",
                       volt::MisconfigurationError);
  CHECK_THROWS_WITH_AS(volt::ModelCheckpoint({.monitor = "a", .mode = "avg"}), "`mode` can be min, max but got avg",
                       volt::MisconfigurationError);
  CHECK_THROWS_AS(volt::ModelCheckpoint({.every_n_train_steps = 2, .every_n_epochs = 1}),
                  volt::MisconfigurationError);
  volt::ModelCheckpoint formatter({.filename = "{epoch}-{val_loss:.2f}"});
  CHECK(formatter.format_checkpoint_name({{"epoch", 3.0}, {"val_loss", 0.12345}}) == "epoch=3-val_loss=0.12");
}

TEST_CASE("enable_checkpointing=false with a ModelCheckpoint, and two progress bars, are rejected") {
  CHECK_THROWS_WITH_AS(volt::Trainer<volt::CPU>({.enable_checkpointing = false, .logger = false},
                                                volt::ModelCheckpoint{}),
                       "Trainer was configured with `enable_checkpointing=False` but found `ModelCheckpoint` in "
                       "callbacks list.",
                       volt::MisconfigurationError);
  CHECK_THROWS_WITH_AS(volt::Trainer<volt::CPU>({.logger = false}, volt::ProgressBar{}, volt::ProgressBar{}),
                       "You added multiple progress bar callbacks to the Trainer, but currently only one progress bar "
                       "is supported.",
                       volt::MisconfigurationError);
}

TEST_CASE("resuming from an epoch-end checkpoint ends bit-identical to an uninterrupted run") {
  TempDir dir;
  auto data = volt_test::make_classification_batches(6, 8);
  auto run = [&](int epochs, const std::filesystem::path& resume_from, const std::filesystem::path& save_dir) {
    torch::manual_seed(3);
    auto model = std::make_shared<volt_test::Classifier>(/*dropout=*/0.3);
    auto options = quiet_options(dir);
    options.max_epochs = epochs;
    options.enable_checkpointing = true;
    volt::Trainer<volt::CPU> trainer(options,
                                     volt::ModelCheckpoint{{.dirpath = save_dir, .save_top_k = -1}});
    if (resume_from.empty()) torch::manual_seed(5);
    trainer.fit(model, data, resume_from);
    return model;
  };
  auto straight = run(4, {}, dir.path / "a");
  run(2, {}, dir.path / "b");
  REQUIRE(std::filesystem::exists(dir.path / "b" / "epoch=1-step=12.ckpt"));
  auto resumed = run(4, dir.path / "b" / "epoch=1-step=12.ckpt", dir.path / "c");
  for (std::size_t i = 0; i < straight->parameters().size(); ++i) {
    CHECK(torch::equal(straight->parameters()[i], resumed->parameters()[i]));
  }
}

namespace {
/// Halves every learning rate at each epoch end by hand (no scheduler), as a user's callback may.
struct HalveLearningRates {
  double* last_lr;
  void on_train_epoch_end(volt::TrainerState& state) {
    for (auto* optimizer : state.optimizers) {
      for (auto& group : optimizer->param_groups()) group.options().set_lr(group.options().get_lr() * 0.5);
    }
    *last_lr = state.optimizers.front()->param_groups().front().options().get_lr();
  }
};
}  // namespace

TEST_CASE("a resume restores learning rates changed by hand, as Lightning's optimizer state_dict does") {
  TempDir dir;
  auto data = volt_test::make_batches(4);
  double last_lr = 0.0;
  auto run = [&](int epochs, const std::filesystem::path& resume_from, const std::filesystem::path& save_dir) {
    torch::manual_seed(3);
    auto model = std::make_shared<volt_test::Regressor>();
    auto options = quiet_options(dir);
    options.max_epochs = epochs;
    options.enable_checkpointing = true;
    volt::Trainer<volt::CPU> trainer(options, HalveLearningRates{&last_lr},
                                     volt::ModelCheckpoint{{.dirpath = save_dir, .save_top_k = -1}});
    trainer.fit(model, data, resume_from);
    return model;
  };
  auto straight = run(4, {}, dir.path / "a");
  CHECK(last_lr == doctest::Approx(1e-2 / 16));
  run(2, {}, dir.path / "b");
  REQUIRE(std::filesystem::exists(dir.path / "b" / "epoch=1-step=8.ckpt"));
  auto resumed = run(4, dir.path / "b" / "epoch=1-step=8.ckpt", dir.path / "c");
  CHECK(last_lr == doctest::Approx(1e-2 / 16));  // 1e-2 / 4 restored, then halved twice
  for (std::size_t i = 0; i < straight->parameters().size(); ++i) {
    CHECK(torch::equal(straight->parameters()[i], resumed->parameters()[i]));
  }
}

TEST_CASE("resuming from a mid-epoch checkpoint (every_n_train_steps) is exact, data order included") {
  TempDir dir;
  auto data = volt_test::make_classification_batches(6, 8);
  auto fit = [&](const std::filesystem::path& resume_from, const std::filesystem::path& save_dir) {
    torch::manual_seed(3);
    auto model = std::make_shared<volt_test::Classifier>(/*dropout=*/0.3);
    auto options = quiet_options(dir);
    options.max_epochs = 3;
    options.enable_checkpointing = true;
    volt::Trainer<volt::CPU> trainer(
        options, volt::ModelCheckpoint{{.dirpath = save_dir, .save_top_k = -1, .every_n_train_steps = 4}});
    if (resume_from.empty()) torch::manual_seed(5);
    trainer.fit(model, volt_test::ShuffledData{&data}, resume_from);
    return model;
  };
  auto straight = fit({}, dir.path / "a");
  REQUIRE(std::filesystem::exists(dir.path / "a" / "epoch=1-step=8.ckpt"));
  auto resumed = fit(dir.path / "a" / "epoch=1-step=8.ckpt", dir.path / "b");
  for (std::size_t i = 0; i < straight->parameters().size(); ++i) {
    CHECK(torch::equal(straight->parameters()[i], resumed->parameters()[i]));
  }
}

TEST_CASE("checkpoint errors name the file") {
  TempDir dir;
  auto model = std::make_shared<Regressor>();
  volt::Trainer<volt::CPU> trainer(quiet_options(dir));
  VOLT_CHECK_THROWS_CONTAINS(trainer.fit(model, volt_test::make_batches(1), dir.path / "missing.ckpt"),
                             volt::CheckpointError, "missing.ckpt does not exist");
  {
    std::ofstream garbage(dir.path / "garbage.ckpt");
    garbage << "not a checkpoint";
  }
  VOLT_CHECK_THROWS_CONTAINS(trainer.fit(model, volt_test::make_batches(1), dir.path / "garbage.ckpt"),
                             volt::CheckpointError, "garbage.ckpt is not a readable checkpoint");
}

TEST_CASE("epoch-interval LR schedulers step once per epoch, step-interval ones once per optimizer step") {
  TempDir dir;
  for (auto interval : {volt::SchedulerInterval::epoch, volt::SchedulerInterval::step}) {
    auto model = std::make_shared<volt_test::ScheduledModel>();
    model->interval = interval;
    auto options = quiet_options(dir);
    options.max_epochs = 3;
    volt::Trainer<volt::CPU> trainer(options);
    trainer.fit(model, volt_test::make_batches(2));
    // Reference: a fresh optimizer and StepLR(step_size=1, gamma=0.5) stepped the expected number of times.
    auto reference = std::make_shared<Regressor>();
    torch::optim::SGD optimizer(reference->parameters(), torch::optim::SGDOptions(1.0));
    torch::optim::StepLR scheduler(optimizer, 1, 0.5);
    const int expected = interval == volt::SchedulerInterval::epoch ? 3 : 6;
    for (int i = 0; i < expected; ++i) scheduler.step();
    CHECK(model->optimizer->param_groups()[0].options().get_lr() ==
          doctest::Approx(optimizer.param_groups()[0].options().get_lr()));
  }
}

TEST_CASE("gradient clipping by norm and by value happens before the optimizer step") {
  TempDir dir;
  for (auto algorithm : {volt::GradClipAlgorithm::norm, volt::GradClipAlgorithm::value}) {
    auto model = std::make_shared<volt_test::SgdRegressor>();
    auto before = model->linear->weight.clone();
    auto options = quiet_options(dir);
    options.max_steps = 1;
    options.gradient_clip_val = 0.01;
    options.gradient_clip_algorithm = algorithm;
    volt::Trainer<volt::CPU> trainer(options);
    auto batches = volt_test::make_batches(1);
    batches[0].target = batches[0].target + 100.0;  // a large gradient
    trainer.fit(model, batches);
    auto change = (model->linear->weight - before).abs();  // SGD lr 1: the change is the clipped gradient
    if (algorithm == volt::GradClipAlgorithm::value) {
      CHECK(change.max().item<double>() <= 0.01 + 1e-7);
    } else {
      auto total = torch::cat({(model->linear->weight - before).flatten(), (model->linear->bias - model->initial_bias)});
      CHECK(total.norm().item<double>() == doctest::Approx(0.01).epsilon(1e-3));
    }
  }
}

TEST_CASE("CSVLogger writes metrics.csv in Lightning's layout and it parses back") {
  TempDir dir;
  auto model = std::make_shared<volt_test::CountingModel>();
  auto options = quiet_options(dir);
  options.max_epochs = 2;
  options.log_every_n_steps = 2;
  options.num_sanity_val_steps = 0;
  options.logger = true;
  volt::Trainer<volt::CPU> trainer(options);
  trainer.fit(model, volt_test::make_batches(4), volt_test::make_batches(2));
  const auto csv_path = dir.path / "lightning_logs" / "version_0" / "metrics.csv";
  REQUIRE(std::filesystem::exists(csv_path));
  CHECK(std::filesystem::exists(dir.path / "lightning_logs" / "version_0" / "hparams.yaml"));
  std::ifstream in(csv_path);
  std::string header;
  std::getline(in, header);
  std::vector<std::string> columns;
  std::stringstream header_stream(header);
  for (std::string column; std::getline(header_stream, column, ',');) columns.push_back(column);
  CHECK(columns.front() == "step");
  auto column = [&](const std::string& name) {
    return std::find(columns.begin(), columns.end(), name) - columns.begin();
  };
  REQUIRE(column("batch_value_step") < static_cast<long>(columns.size()));
  REQUIRE(column("val_index") < static_cast<long>(columns.size()));
  REQUIRE(column("epoch") < static_cast<long>(columns.size()));
  int step_rows = 0, val_rows = 0;
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> cells;
    std::stringstream row(line);
    for (std::string cell; std::getline(row, cell, ',');) cells.push_back(cell);
    cells.resize(columns.size());
    if (!cells[column("batch_value_step")].empty()) {
      ++step_rows;
      // Logged every 2 steps at steps 1, 3, 5, 7 with the batch value of batch 1 or 3.
      const double value = std::stod(cells[column("batch_value_step")]);
      CHECK((value == 10.0 || value == 30.0));
    }
    if (!cells[column("val_index")].empty()) {
      ++val_rows;
      CHECK(std::stod(cells[column("val_index")]) == doctest::Approx(0.5));
    }
  }
  CHECK(step_rows == 4);
  CHECK(val_rows == 2);
  // A second run writes version_1.
  auto again = std::make_shared<volt_test::CountingModel>();
  volt::Trainer<volt::CPU> second(options);
  second.fit(again, volt_test::make_batches(1));
  CHECK(std::filesystem::exists(dir.path / "lightning_logs" / "version_1" / "metrics.csv"));
}

TEST_CASE("the progress bar prints one line per epoch when not on a terminal") {
  TempDir dir;
  std::ostringstream out;
  auto model = std::make_shared<volt_test::CountingModel>();
  auto options = quiet_options(dir);
  options.max_epochs = 2;
  options.enable_progress_bar = true;
  options.num_sanity_val_steps = 0;
  volt::Trainer<volt::CPU> trainer(options, volt::ProgressBar{{.stream = &out}});
  trainer.fit(model, volt_test::make_batches(5), volt_test::make_batches(1));
  std::vector<std::string> lines;
  std::stringstream text(out.str());
  for (std::string line; std::getline(text, line);) lines.push_back(line);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].starts_with("Epoch 0/1: "));
  CHECK(lines[0].find("| 5/5 [") != std::string::npos);
  CHECK(lines[0].find("it/s") != std::string::npos);
  CHECK(lines[1].find("val_index=") != std::string::npos);  // prog_bar metric of validation
  CHECK(lines[1].find("loss=") != std::string::npos);       // prog_bar metric of training
}

TEST_CASE("ModelSummary prints Lightning's table and counts") {
  CHECK(volt::human_readable_count(0) == "0  ");
  CHECK(volt::human_readable_count(12) == "12  ");
  CHECK(volt::human_readable_count(1234) == "1.2 K");
  CHECK(volt::human_readable_count(235146) == "235 K");
  CHECK(volt::human_readable_count(2000000) == "2.0 M");
  auto model = std::make_shared<volt_test::Classifier>();
  const std::string text = volt::ModelSummary().summarize(*model);
  CHECK(text.find("| Name") != std::string::npos);
  CHECK(text.find("0 | fc1     | Linear  | 144    | train") != std::string::npos);
  std::int64_t total = 0;
  for (const auto& p : model->parameters()) total += p.numel();
  CHECK(text.find(volt::human_readable_count(total) + std::string(10 - volt::human_readable_count(total).size(), ' ') +
                  "Total params") != std::string::npos);
}

TEST_CASE("callbacks: hooks run in Lightning's order, a bool hook can stop training") {
  TempDir dir;
  auto model = std::make_shared<Regressor>();
  auto options = quiet_options(dir);
  options.max_epochs = 5;
  volt_test::HookOrder order;
  volt::Trainer<volt::CPU> trainer(options, order.callback(/*stop_at_step=*/3));
  trainer.fit(model, volt_test::make_batches(2), volt_test::make_batches(1));
  CHECK(trainer.global_step() == 3);
  const std::vector<std::string> expected_start{"setup", "on_fit_start", "on_sanity_check_start",
                                                "on_validation_start", "on_validation_end", "on_sanity_check_end",
                                                "on_train_start", "on_train_epoch_start", "on_train_batch_start",
                                                "on_before_zero_grad", "on_before_backward", "on_after_backward",
                                                "on_before_optimizer_step", "on_train_batch_end"};
  REQUIRE(order.events->size() > expected_start.size());
  CHECK(std::vector<std::string>(order.events->begin(), order.events->begin() + expected_start.size()) ==
        expected_start);
  CHECK(order.events->back() == "teardown");
}

namespace {
/// Counts training batches; the count travels through checkpoints.
struct BatchCounter {
  std::int64_t batches = 0;
  std::shared_ptr<std::int64_t> loaded = std::make_shared<std::int64_t>(-1);
  void on_train_batch_end(volt::TrainerState&, const torch::Tensor&, std::int64_t) { ++batches; }
  void save_state(torch::serialize::OutputArchive& archive) const { archive.write("batches", c10::IValue(batches)); }
  void load_state(torch::serialize::InputArchive& archive) {
    c10::IValue value;
    archive.read("batches", value);
    batches = value.toInt();
    *loaded = batches;
  }
};
}  // namespace

TEST_CASE("callbacks: a callback's state round-trips through a checkpoint") {
  TempDir dir;
  auto options = quiet_options(dir);
  options.max_epochs = 1;
  const auto path = dir.path / "state.ckpt";
  {
    volt::Trainer<volt::CPU> trainer(options, BatchCounter{});
    auto model = std::make_shared<Regressor>();
    trainer.fit(model, volt_test::make_batches(3));
    REQUIRE(trainer.callback<BatchCounter>()->batches == 3);
    trainer.save_checkpoint(path);
  }
  options.max_epochs = 2;
  volt::Trainer<volt::CPU> resumed(options, BatchCounter{});
  auto model = std::make_shared<Regressor>();
  resumed.fit(model, volt_test::make_batches(3), path);
  const auto* counter = resumed.callback<BatchCounter>();
  REQUIRE(counter != nullptr);
  CHECK(*counter->loaded == 3);  // load_state got what save_state wrote
  CHECK(counter->batches == 6);  // and counted on from there
}

namespace {
/// Writes zeros as the checkpoint's model entry and a note beside it; on resume reads the note and puts the
/// model's real weights (kept under "real_model") back.
struct CheckpointEditor {
  std::shared_ptr<std::int64_t> note_read = std::make_shared<std::int64_t>(-1);
  void on_save_checkpoint(volt::CheckpointSave& checkpoint) {
    torch::serialize::OutputArchive note;
    note.write("value", c10::IValue(std::int64_t{42}));
    checkpoint.write("editor_note", note);
    torch::serialize::OutputArchive real;
    checkpoint.write_module_weights(real);
    checkpoint.write("real_model", real);
    std::vector<torch::Tensor> zeros;
    for (const auto& p : checkpoint.module().parameters()) zeros.push_back(torch::zeros_like(p));
    torch::serialize::OutputArchive replaced;
    checkpoint.write_weights(replaced, zeros, checkpoint.module().buffers());
    checkpoint.replace_model_entry(std::move(replaced));
  }
  void on_load_checkpoint(volt::CheckpointLoad& checkpoint) {
    torch::serialize::InputArchive note;
    REQUIRE(checkpoint.try_read("editor_note", note));
    c10::IValue value;
    note.read("value", value);
    *note_read = value.toInt();
    for (const auto& p : checkpoint.module().parameters()) CHECK(p.abs().sum().item<double>() == 0.0);
    checkpoint.load_module_weights("real_model");
  }
};
}  // namespace

TEST_CASE("callbacks: on_save_checkpoint adds entries and replaces the model entry, on_load_checkpoint reads them") {
  TempDir dir;
  auto options = quiet_options(dir);
  options.max_epochs = 1;
  const auto full = dir.path / "full.ckpt";
  const auto weights_only = dir.path / "weights.ckpt";
  torch::Tensor trained;
  {
    volt::Trainer<volt::CPU> trainer(options, CheckpointEditor{});
    auto model = std::make_shared<Regressor>();
    trainer.fit(model, volt_test::make_batches(3));
    trainer.save_checkpoint(full);
    trainer.save_checkpoint(weights_only, /*weights_only=*/true);
    trained = model->linear->weight.detach().clone();
  }
  Regressor loaded;
  volt::load_checkpoint_weights(loaded, full);
  CHECK(loaded.linear->weight.abs().sum().item<double>() == 0.0);  // the replaced model entry
  volt::load_checkpoint_weights(loaded, weights_only);
  CHECK(torch::equal(loaded.linear->weight, trained));  // weights-only checkpoints are not offered to callbacks

  options.max_epochs = 2;
  auto model = std::make_shared<Regressor>();
  struct FirstStepWeights {
    std::shared_ptr<torch::Tensor> at_start = std::make_shared<torch::Tensor>();
    void on_train_start(volt::TrainerState& state) {
      *at_start = state.model->parameters().front().detach().clone();
    }
  } first;
  volt::Trainer<volt::CPU> checked(options, CheckpointEditor{}, first);
  checked.fit(model, volt_test::make_batches(3), full);
  CHECK(*checked.callback<CheckpointEditor>()->note_read == 42);
  CHECK(torch::equal(*first.at_start, trained));  // the real weights went back in
}

namespace {
// Records the evaluation hooks with their batch indices.
struct EvaluationHooks {
  std::shared_ptr<std::vector<std::string>> events = std::make_shared<std::vector<std::string>>();
  void add(const std::string& name, std::int64_t batch_idx = -1) {
    events->push_back(batch_idx < 0 ? name : name + " " + std::to_string(batch_idx));
  }
  void on_validation_start(volt::TrainerState&) { add("on_validation_start"); }
  void on_validation_epoch_start(volt::TrainerState&) { add("on_validation_epoch_start"); }
  void on_validation_batch_start(volt::TrainerState&, std::int64_t i) { add("on_validation_batch_start", i); }
  void on_validation_batch_end(volt::TrainerState&, std::int64_t i) { add("on_validation_batch_end", i); }
  void on_validation_epoch_end(volt::TrainerState&) { add("on_validation_epoch_end"); }
  void on_validation_end(volt::TrainerState&) { add("on_validation_end"); }
  void on_test_start(volt::TrainerState&) { add("on_test_start"); }
  void on_test_epoch_start(volt::TrainerState&) { add("on_test_epoch_start"); }
  void on_test_batch_start(volt::TrainerState&, std::int64_t i) { add("on_test_batch_start", i); }
  void on_test_batch_end(volt::TrainerState&, std::int64_t i) { add("on_test_batch_end", i); }
  void on_test_epoch_end(volt::TrainerState&) { add("on_test_epoch_end"); }
  void on_test_end(volt::TrainerState&) { add("on_test_end"); }
};
}  // namespace

TEST_CASE("evaluation hooks: batch start and end around each step, test epoch start (Lightning's order)") {
  TempDir dir;
  auto model = std::make_shared<volt_test::CountingModel>();
  EvaluationHooks hooks;
  volt::Trainer<volt::CPU> trainer(quiet_options(dir), hooks);
  trainer.validate(model, volt_test::make_batches(2));
  CHECK(*hooks.events == std::vector<std::string>{"on_validation_start", "on_validation_epoch_start",
                                                  "on_validation_batch_start 0", "on_validation_batch_end 0",
                                                  "on_validation_batch_start 1", "on_validation_batch_end 1",
                                                  "on_validation_epoch_end", "on_validation_end"});
  hooks.events->clear();
  trainer.test(model, volt_test::make_batches(2));
  CHECK(*hooks.events == std::vector<std::string>{"on_test_start", "on_test_epoch_start", "on_test_batch_start 0",
                                                  "on_test_batch_end 0", "on_test_batch_start 1",
                                                  "on_test_batch_end 1", "on_test_epoch_end", "on_test_end"});
}

namespace {
// Records the predict hooks of a callback and of the model, in the order they run.
using Events = std::shared_ptr<std::vector<std::string>>;
void record(const Events& events, const std::string& name, std::int64_t batch_idx = -1) {
  events->push_back(batch_idx < 0 ? name : name + " " + std::to_string(batch_idx));
}
struct PredictHooks {
  Events events;
  void on_predict_start(volt::TrainerState&) { record(events, "callback on_predict_start"); }
  void on_predict_epoch_start(volt::TrainerState&) { record(events, "callback on_predict_epoch_start"); }
  void on_predict_batch_start(volt::TrainerState&, std::int64_t i) { record(events, "callback on_predict_batch_start", i); }
  void on_predict_batch_end(volt::TrainerState&, std::int64_t i) { record(events, "callback on_predict_batch_end", i); }
  void on_predict_epoch_end(volt::TrainerState&) { record(events, "callback on_predict_epoch_end"); }
  void on_predict_end(volt::TrainerState& state) {
    record(events, std::string("callback on_predict_end, stage ") +
                       (state.stage == volt::Stage::predicting ? "predicting" : "other"));
  }
};
struct PredictHookModel : Regressor {
  Events events = std::make_shared<std::vector<std::string>>();
  void on_predict_start() { record(events, "model on_predict_start"); }
  void on_predict_epoch_start(volt::StepContext&) { record(events, "model on_predict_epoch_start"); }
  void on_predict_batch_start(const torch::data::Example<>& batch, std::int64_t i) {
    record(events, "model on_predict_batch_start rows " + std::to_string(batch.data.size(0)), i);
  }
  torch::Tensor predict_step(const torch::data::Example<>& batch, std::int64_t i) {
    record(events, std::string("predict_step ") + (is_training() ? "train" : "eval"), i);
    return forward(batch.data) * 0 + static_cast<double>(i);
  }
  // Lightning's order of arguments: the prediction, the batch, its index.
  void on_predict_batch_end(const torch::Tensor& prediction, const torch::data::Example<>&, std::int64_t i) {
    record(events, "model on_predict_batch_end prediction " + std::to_string(prediction[0].item<double>()), i);
  }
  void on_predict_epoch_end() { record(events, "model on_predict_epoch_end"); }
  void on_predict_end() { record(events, "model on_predict_end"); }
};
}  // namespace

TEST_CASE("predict hooks: callbacks' then the model's, in Lightning's order; the model's mode comes back") {
  TempDir dir;
  auto model = std::make_shared<PredictHookModel>();
  model->train();
  volt::Trainer<volt::CPU> trainer(quiet_options(dir), PredictHooks{model->events});
  const auto predictions = trainer.predict(model, volt_test::make_batches(2));
  REQUIRE(predictions.size() == 2);
  CHECK(*model->events == std::vector<std::string>{
                              "callback on_predict_start", "model on_predict_start",
                              "callback on_predict_epoch_start", "model on_predict_epoch_start",
                              "callback on_predict_batch_start 0", "model on_predict_batch_start rows 4 0",
                              "predict_step eval 0",
                              "callback on_predict_batch_end 0", "model on_predict_batch_end prediction 0.000000 0",
                              "callback on_predict_batch_start 1", "model on_predict_batch_start rows 4 1",
                              "predict_step eval 1",
                              "callback on_predict_batch_end 1", "model on_predict_batch_end prediction 1.000000 1",
                              "callback on_predict_epoch_end", "model on_predict_epoch_end",
                              "callback on_predict_end, stage predicting", "model on_predict_end"});
  CHECK(model->is_training());  // Lightning's _ModuleMode: the mode before predict is restored
  CHECK(trainer.state().stage == volt::Stage::none);
}

TEST_CASE("validate, test and predict") {
  TempDir dir;
  auto model = std::make_shared<volt_test::CountingModel>();
  volt::Trainer<volt::CPU> trainer(quiet_options(dir));
  auto val = trainer.validate(model, volt_test::make_batches(4));
  CHECK(val.at("val_index") == doctest::Approx(1.5));
  auto test = trainer.test(model, volt_test::make_batches(2));
  CHECK(test.at("test_index") == doctest::Approx(0.5));
  auto predictions = trainer.predict(model, volt_test::make_batches(3));
  REQUIRE(predictions.size() == 3);
  CHECK(predictions[2].size(0) == 4);
  auto no_test = std::make_shared<Regressor>();
  CHECK_THROWS_WITH_AS(trainer.test(no_test, volt_test::make_batches(1)),
                       "No `test_step()` method defined to run `Trainer.test`.", volt::MisconfigurationError);
}

TEST_CASE("fast_dev_run runs one batch of training and validation and writes nothing") {
  TempDir dir;
  auto model = std::make_shared<volt_test::CountingModel>();
  auto options = quiet_options(dir);
  options.fast_dev_run = 1;
  options.enable_checkpointing = true;
  options.logger = true;
  volt::Trainer<volt::CPU> trainer(options);
  trainer.fit(model, volt_test::make_batches(5), volt_test::make_batches(5));
  CHECK(trainer.global_step() == 1);
  CHECK(model->validation_batches == 1);
  CHECK(!std::filesystem::exists(dir.path / "lightning_logs"));
  CHECK(!std::filesystem::exists(dir.path / "checkpoints"));
}

TEST_CASE("an exception in training_step reaches the caller after on_exception and teardown") {
  TempDir dir;
  auto model = std::make_shared<volt_test::CountingModel>();
  model->throw_at_batch = 2;
  auto options = quiet_options(dir);
  options.max_epochs = 1;
  volt_test::HookOrder order;
  volt::Trainer<volt::CPU> trainer(options, order.callback(-1));
  VOLT_CHECK_THROWS_CONTAINS(trainer.fit(model, volt_test::make_batches(5)), std::runtime_error, "boom at batch 2");
  VOLT_CHECK_THROWS_CONTAINS(trainer.fit(model, volt_test::make_batches(5)), std::runtime_error,
                             "raised during epoch 0, training batch 2");
  CHECK(std::find(order.events->begin(), order.events->end(), "on_exception") != order.events->end());
  CHECK(order.events->back() == "teardown");
}

TEST_CASE("TORCH_MODULE holders work as models") {
  TempDir dir;
  volt_test::HeldRegressor model;
  auto options = quiet_options(dir);
  options.max_epochs = 1;
  volt::Trainer<volt::CPU> trainer(options);
  trainer.fit(model, volt_test::make_batches(3));
  CHECK(trainer.global_step() == 3);
}

TEST_CASE("ModelCheckpoint with a monitor warns before the first validation and fails after it") {
  TempDir dir;
  {
    // max_steps stops training before the end-of-epoch validation: a warning, no checkpoint, no error.
    auto model = std::make_shared<volt_test::CountingModel>();
    auto options = quiet_options(dir);
    options.max_steps = 2;
    options.num_sanity_val_steps = 0;
    options.enable_checkpointing = true;
    volt::Trainer<volt::CPU> trainer(options, volt::ModelCheckpoint{{.dirpath = dir.path / "w", .monitor = "val_index"}});
    volt_test::CaptureLog log;
    trainer.fit(model, volt_test::make_batches(5), volt_test::make_batches(1));
    CHECK(log.warned("`ModelCheckpoint(monitor='val_index')` could not find the monitored key in the returned "
                     "metrics: ["));
    CHECK(!std::filesystem::exists(dir.path / "w"));
  }
  {
    auto model = std::make_shared<volt_test::CountingModel>();
    auto options = quiet_options(dir);
    options.num_sanity_val_steps = 0;
    options.enable_checkpointing = true;
    volt::Trainer<volt::CPU> trainer(options, volt::ModelCheckpoint{{.dirpath = dir.path / "e", .monitor = "never"}});
    CHECK_THROWS_WITH_AS(trainer.fit(model, volt_test::make_batches(2), volt_test::make_batches(1)),
                         doctest::Contains("`ModelCheckpoint(monitor='never')` could not find the monitored key"),
                         volt::MisconfigurationError);
  }
}

TEST_CASE("ModelCheckpoint tells the loggers what it keeps after each save (Lightning's after_save_checkpoint)") {
  struct Saves : volt::Logger {
    std::filesystem::path folder;
    std::vector<volt::SavedCheckpoints> seen;
    void log_metrics(const std::map<std::string, double>&, std::int64_t) override {}
    void log_hyperparams(const std::map<std::string, std::string>&) override {}
    std::filesystem::path log_dir() const override { return folder; }
    void after_save_checkpoint(const volt::SavedCheckpoints& saved) override {
      seen.push_back(saved);
      for (const auto& [path, score] : saved.best_k_models) CHECK(std::filesystem::exists(path));
    }
  };
  TempDir dir;
  auto options = quiet_options(dir);
  options.max_epochs = 3;
  options.logger = true;
  options.enable_checkpointing = true;
  auto logger = std::make_shared<Saves>();
  logger->folder = dir.path;
  volt::Trainer<volt::CPU> trainer(
      options, logger,
      volt::ModelCheckpoint{{.dirpath = dir.path / "ckpt", .monitor = "val_loss", .save_top_k = 1, .save_last = true}});
  auto model = std::make_shared<volt_test::Regressor>();
  trainer.fit(model, volt_test::make_batches(3), volt_test::make_batches(2));
  const auto& seen = logger->seen;
  REQUIRE(seen.size() >= 4);  // each epoch: the top-k save when val_loss improved, then last.ckpt
  CHECK(seen[0].last_model_path.empty());  // the first top-k save comes before the first last.ckpt
  CHECK_FALSE(seen[0].best_model_path.empty());
  CHECK(seen[0].current_score == seen[0].best_model_score);
  CHECK(seen[1].last_model_path == dir.path / "ckpt" / "last.ckpt");
  const auto& final = seen.back();
  const auto* checkpoint = trainer.checkpoint_callback();
  REQUIRE(checkpoint != nullptr);
  CHECK(final.best_model_path == checkpoint->best_model_path());
  CHECK(final.best_model_score == checkpoint->best_model_score());
  CHECK(final.best_k_models == checkpoint->best_k_models());
  CHECK(final.monitor == "val_loss");
  CHECK(final.mode == "min");
  CHECK(final.save_top_k == 1);
  CHECK(final.save_last);
  CHECK_FALSE(final.save_weights_only);
}

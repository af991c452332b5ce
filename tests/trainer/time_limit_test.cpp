// max_time, volt::Timer and ModelCheckpoint(train_time_interval): a fit stops on time, leaves a checkpoint, and
// a resume from it finishes the run with the weights of an uninterrupted one. Lightning 2.6.6's messages were
// recorded with tests/oracle/record_time_limit.py.
#include <torch/torch.h>

#include <doctest/doctest.h>

#include "test_common.hpp"
#include "trainer/trainer_fixtures.hpp"

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

using volt_test::quiet_options;
using volt_test::TempDir;
using namespace std::chrono_literals;

namespace {

// Deterministic SGD on the CPU; every step takes at least `step_time`.
struct SlowRegressor : volt_test::Regressor {
  std::chrono::milliseconds step_time{20};
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t) {
    std::this_thread::sleep_for(step_time);
    return torch::mse_loss(forward(batch.data), batch.target);
  }
  std::shared_ptr<torch::optim::SGD> configure_optimizers() {
    return std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  }
  void test_step(const torch::data::Example<>&, std::int64_t) {}
};

std::shared_ptr<SlowRegressor> fresh_model() {
  torch::manual_seed(7);
  return std::make_shared<SlowRegressor>();
}

std::vector<std::filesystem::path> checkpoints_in(const std::filesystem::path& folder) {
  std::vector<std::filesystem::path> found;
  if (!std::filesystem::exists(folder)) return found;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    if (entry.path().extension() == ".ckpt") found.push_back(entry.path());
  }
  return found;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

TEST_CASE("Duration reads Lightning's DD:HH:MM:SS and std::chrono, and refuses other text with its message") {
  CHECK(volt::Duration("00:12:00:00").seconds() == 12 * 3600.0);
  CHECK(volt::Duration(" 01:00:00:05 ").seconds() == 86405.0);
  CHECK(volt::Duration("123:00:00:01").seconds() == 123 * 86400.0 + 1);
  CHECK(volt::Duration(std::chrono::milliseconds(1500)).seconds() == 1.5);
  CHECK(volt::Duration(std::chrono::hours(2)).seconds() == 7200.0);
  // Lightning 2.6.6 (record_time_limit.py, "BAD"): Timer(duration=...) and Trainer(max_time=...) alike.
  CHECK_THROWS_WITH_AS(volt::Duration("1:2:3"),
                       "`Timer(duration='1:2:3')` is not a valid duration. Expected a string in the format DD:HH:MM:SS.",
                       volt::MisconfigurationError);
  CHECK_THROWS_WITH_AS(volt::Duration("00:1:00:00"),
                       "`Timer(duration='00:1:00:00')` is not a valid duration. Expected a string in the format "
                       "DD:HH:MM:SS.",
                       volt::MisconfigurationError);
  CHECK_THROWS_AS(volt::Duration("00:00:00:00:00"), volt::MisconfigurationError);
  CHECK_THROWS_AS(volt::Duration(""), volt::MisconfigurationError);
  // Python's longest timedelta is 999999999 days, 23:59:59.999999; Lightning raises OverflowError past it.
  CHECK(volt::Duration("999999999:23:59:59").seconds() == 999999999 * 86400.0 + 86399);
  CHECK_THROWS_WITH_AS(volt::Duration("999999999:23:59:60"),
                       "`Timer(duration='999999999:23:59:60')` is too long: a duration is at most 999999999 days, "
                       "23:59:59.",
                       volt::MisconfigurationError);
  CHECK_THROWS_AS(volt::Duration("99999999999999999999999:00:00:00"), volt::MisconfigurationError);
  // str(datetime.timedelta(...)) in Python 3.11.
  CHECK(volt::Duration(5s).to_string() == "0:00:05");
  CHECK(volt::Duration(1500ms).to_string() == "0:00:01.500000");
  CHECK(volt::Duration("01:02:03:04").to_string() == "1 day, 2:03:04");
  CHECK(volt::Duration("03:00:00:00").to_string() == "3 days, 0:00:00");
  CHECK(volt::Duration(0s).to_string() == "0:00:00");
}

TEST_CASE("ModelCheckpoint refuses train_time_interval with another interval, with Lightning's message") {
  // Lightning 2.6.6 (record_time_limit.py, "COMBINATION").
  CHECK_THROWS_WITH_AS(volt::ModelCheckpoint({.every_n_train_steps = 3, .train_time_interval = 5s}),
                       "Combination of parameters every_n_train_steps=3, every_n_epochs=0 and "
                       "train_time_interval=0:00:05 should be mutually exclusive.",
                       volt::MisconfigurationError);
  CHECK_THROWS_WITH_AS(volt::ModelCheckpoint({.every_n_epochs = 1, .train_time_interval = 1500ms}),
                       "Combination of parameters every_n_train_steps=0, every_n_epochs=1 and "
                       "train_time_interval=0:00:01.500000 should be mutually exclusive.",
                       volt::MisconfigurationError);
  CHECK_THROWS_WITH_AS(volt::ModelCheckpoint({.every_n_train_steps = 2, .every_n_epochs = 1}),
                       "Combination of parameters every_n_train_steps=2, every_n_epochs=1 and "
                       "train_time_interval=None should be mutually exclusive.",
                       volt::MisconfigurationError);
}

TEST_CASE("max_time stops fit on time, leaves a checkpoint, and the resumed run ends with identical weights") {
  TempDir dir;
  const auto data = volt_test::make_batches(8);
  auto options = quiet_options(dir);
  options.max_epochs = -1;
  options.max_steps = 60;

  // The uninterrupted run.
  auto full = fresh_model();
  {
    volt::Trainer<volt::CPU> trainer(options);
    trainer.fit(full, data);
    REQUIRE(trainer.global_step() == 60);
  }

  // The same run with a time limit of 0.6 s (about 30 steps of 20 ms), checkpointing after every batch
  // through train_time_interval=0.
  const auto folder = dir.path / "timed";
  auto timed = options;
  timed.max_time = 600ms;
  timed.enable_checkpointing = true;
  auto stopped = fresh_model();
  std::int64_t steps_before_stop = 0;
  double spent = 0.0;
  {
    volt_test::CaptureLog log;
    volt::Trainer<volt::CPU> trainer(timed, volt::ModelCheckpoint{{.dirpath = folder, .train_time_interval = 0s}});
    const auto start = std::chrono::steady_clock::now();
    trainer.fit(stopped, data);
    const double wall = seconds_since(start);
    steps_before_stop = trainer.global_step();
    auto* timer = trainer.callback<volt::Timer>();
    REQUIRE(timer != nullptr);
    spent = timer->time_elapsed();
    MESSAGE("max_time=0.6 s: fit returned after " << wall << " s (training time " << spent << " s, "
                                                   << steps_before_stop << " steps of >= 20 ms)");
    CHECK(spent >= 0.6);
    // On time: the limit is checked after every batch, so it is passed by at most a step and a save or so.
    CHECK(wall < 0.6 + 1.0);
    CHECK(steps_before_stop > 0);
    CHECK(steps_before_stop < 60);
    CHECK(timer->time_remaining().value() <= 0.0);
    CHECK(log.informed("Time limit reached. Elapsed time is 0:00:0"));
    CHECK(log.informed(". Signaling Trainer to stop."));
  }
  const auto kept = checkpoints_in(folder);
  REQUIRE(kept.size() == 1);  // the latest one: the batch at which the limit was reached

  // Resumed with the same limit, no time is left: the Timer counts the time the checkpoint holds.
  {
    auto again = fresh_model();
    volt::Trainer<volt::CPU> trainer(timed, volt::ModelCheckpoint{{.dirpath = dir.path / "unused", .train_time_interval = 0s}});
    trainer.fit(again, data, kept.front());
    CHECK(trainer.global_step() == steps_before_stop);
    CHECK(trainer.callback<volt::Timer>()->time_elapsed() >= 0.6);
  }

  // Resumed with a longer limit, it finishes the 60 steps with the uninterrupted run's weights, bit for bit.
  auto resumed = fresh_model();
  {
    auto longer = timed;
    longer.max_time = std::chrono::hours(1);
    volt::Trainer<volt::CPU> trainer(longer, volt::ModelCheckpoint{{.dirpath = dir.path / "resumed", .train_time_interval = 0s}});
    trainer.fit(resumed, data, kept.front());
    CHECK(trainer.global_step() == 60);
    CHECK(trainer.callback<volt::Timer>()->time_elapsed() >= 0.6);
  }
  const auto expected = full->parameters();
  const auto actual = resumed->parameters();
  REQUIRE(expected.size() == actual.size());
  for (std::size_t i = 0; i < expected.size(); ++i) CHECK(torch::equal(expected[i], actual[i]));
}

TEST_CASE("min_steps holds against max_time, and a given Timer replaces max_time's") {
  TempDir dir;
  auto options = quiet_options(dir);
  options.max_epochs = -1;
  options.max_steps = 50;
  options.min_steps = 12;
  options.max_time = 1ms;
  {
    auto model = fresh_model();
    volt::Trainer<volt::CPU> trainer(options);
    trainer.fit(model, volt_test::make_batches(5));
    CHECK(trainer.global_step() == 12);  // Lightning: should_stop waits for min_steps
  }
  {
    auto model = fresh_model();
    volt_test::CaptureLog log;
    volt::Trainer<volt::CPU> trainer(options, volt::Timer(std::chrono::hours(1)));
    CHECK(log.informed("Ignoring `Trainer(max_time=...)`, callbacks list already contains a Timer."));
    trainer.fit(model, volt_test::make_batches(5));
    CHECK(trainer.global_step() == 50);
    CHECK(trainer.callback<volt::Timer>()->time_remaining().value() > 3000.0);
  }
}

TEST_CASE("Timer measures training, validation and test, and checks per epoch when asked") {
  TempDir dir;
  auto options = quiet_options(dir);
  options.max_epochs = 4;
  options.num_sanity_val_steps = 0;
  auto model = fresh_model();
  volt::Trainer<volt::CPU> trainer(options, volt::Timer({.duration = 50ms, .interval = volt::TimerInterval::epoch}));
  trainer.fit(model, volt_test::make_batches(3), volt_test::make_batches(1));
  // 3 steps of 20 ms pass the limit in the first epoch; the check at its end stops fit.
  CHECK(trainer.current_epoch() == 1);
  CHECK(trainer.global_step() == 3);
  auto* timer = trainer.callback<volt::Timer>();
  CHECK(timer->time_elapsed(volt::TimerStage::train) >= 0.06);
  CHECK(timer->start_time(volt::TimerStage::validate).has_value());
  CHECK(timer->end_time(volt::TimerStage::validate).has_value());
  CHECK_FALSE(timer->start_time(volt::TimerStage::test).has_value());
  CHECK(timer->time_elapsed(volt::TimerStage::test) == 0.0);
  trainer.test(model, volt_test::make_batches(1));
  CHECK(timer->end_time(volt::TimerStage::test).has_value());
  CHECK(timer->time_elapsed(volt::TimerStage::test) >= 0.0);
  CHECK_FALSE(volt::Timer().time_remaining().has_value());
}

TEST_CASE("ModelCheckpoint(train_time_interval) saves at most once per interval") {
  TempDir dir;
  auto options = quiet_options(dir);
  options.max_epochs = -1;
  options.max_steps = 40;
  options.enable_checkpointing = true;
  const auto folder = dir.path / "ckpt";
  auto model = fresh_model();
  volt::Trainer<volt::CPU> trainer(options,
                                   volt::ModelCheckpoint{{.dirpath = folder, .save_top_k = -1, .train_time_interval = 250ms}});
  const auto start = std::chrono::steady_clock::now();
  trainer.fit(model, volt_test::make_batches(10));
  const double wall = seconds_since(start);
  const auto saved = checkpoints_in(folder).size();
  CHECK(saved >= 1);
  CHECK(static_cast<double>(saved) <= wall / 0.25 + 0.5);
  CHECK(saved < 40);  // not every step: 40 steps of >= 20 ms are >= 0.8 s, so at most 3 saves
}

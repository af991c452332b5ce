#include "test_common.hpp"

#include "trainer/trainer_fixtures.hpp"

#include <csignal>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

using volt_test::TempDir;
using volt_test::write_bytes;
using volt_test::quiet_options;

namespace {

/// A model that raises SIGINT/SIGTERM (or throws) from inside a chosen training step.
struct SignalModel : volt_test::Regressor {
  std::int64_t signal_at_batch = -1;
  int signal = SIGINT;
  std::vector<std::int64_t> trained_batches;  // batch_idx of every training step, in order
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t batch_idx) {
    trained_batches.push_back(batch_idx);
    if (batch_idx == signal_at_batch) std::raise(signal);
    return torch::mse_loss(forward(batch.data), batch.target);
  }
};

struct NanModel : volt_test::Regressor {
  std::int64_t nan_at_batch = 3;
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t batch_idx) {
    auto loss = torch::mse_loss(forward(batch.data), batch.target);
    return batch_idx == nan_at_batch ? loss * std::numeric_limits<float>::quiet_NaN() : loss;
  }
};

struct CustomError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct ThrowingStepModel : volt_test::Regressor {
  int kind = 0;  // 0: CustomError, 1: c10::Error (TORCH_CHECK), 2: std::invalid_argument
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t batch_idx) {
    if (batch_idx == 2) {
      if (kind == 0) throw CustomError("custom failure");
      if (kind == 1) TORCH_CHECK(false, "torch check failed");
      throw std::invalid_argument("bad argument");
    }
    return torch::mse_loss(forward(batch.data), batch.target);
  }
};

/// A data range whose iterator throws when it reaches `throw_at`.
struct ThrowingData {
  const volt_test::Batches* data;
  std::size_t throw_at;
  struct Iterator {
    using iterator_category = std::input_iterator_tag;
    using value_type = torch::data::Example<>;
    using difference_type = std::ptrdiff_t;
    const ThrowingData* owner = nullptr;
    std::size_t position = 0;
    const value_type& operator*() const {
      if (position == owner->throw_at) throw std::runtime_error("loader failed reading a sample");
      return (*owner->data)[position];
    }
    Iterator& operator++() {
      ++position;
      return *this;
    }
    bool operator==(const Iterator& other) const { return position == other.position; }
  };
  Iterator begin() const { return {this, 0}; }
  Iterator end() const { return {this, data->size()}; }
  std::size_t size() const { return data->size(); }
};

struct FailingValidationModel : volt_test::Regressor {
  void validation_step(const torch::data::Example<>&, std::int64_t batch_idx) {
    if (batch_idx == 1) throw std::runtime_error("validation failure");
  }
};

struct ExceptionRecorder {
  std::shared_ptr<std::string> message = std::make_shared<std::string>();
  std::shared_ptr<int> teardowns = std::make_shared<int>(0);
  void on_exception(volt::TrainerState&, const std::exception_ptr& error) {
    try {
      std::rethrow_exception(error);
    } catch (const volt::TrainingInterrupted& interrupted) {
      *message = std::string("interrupted: ") + interrupted.what();
    } catch (const std::exception& other) {
      *message = other.what();
    }
  }
  void teardown(volt::TrainerState&) { ++*teardowns; }
};

bool parameters_equal(torch::nn::Module& a, torch::nn::Module& b) {
  const auto pa = a.parameters();
  const auto pb = b.parameters();
  if (pa.size() != pb.size()) return false;
  for (std::size_t i = 0; i < pa.size(); ++i) {
    if (!torch::equal(pa[i], pb[i])) return false;
  }
  return true;
}

}  // namespace

// ---- item 4: graceful interruption ---------------------------------------------------------------

TEST_CASE("SIGINT during fit finishes the step, saves interrupted.ckpt, tears down, returns; resume is exact") {
  TempDir dir;
  auto data = volt_test::make_batches(6);
  auto options = quiet_options(dir);
  options.max_epochs = 2;
  options.enable_checkpointing = true;

  // A handler of the application, to be restored after fit.
  static volatile std::sig_atomic_t own_handler_calls = 0;
  auto* previous = std::signal(SIGINT, [](int) { own_handler_calls = own_handler_calls + 1; });

  torch::manual_seed(11);
  auto model = std::make_shared<SignalModel>();
  model->signal_at_batch = 3;
  ExceptionRecorder recorder;
  volt::Trainer<volt::CPU> trainer(options, volt::ModelCheckpoint{{.dirpath = dir.path / "ckpt"}}, recorder);
  volt_test::CaptureLog log;
  CHECK_NOTHROW(trainer.fit(model, data));
  CHECK(trainer.interrupted());
  CHECK(trainer.stop_reason() == "interrupted by SIGINT");
  CHECK(trainer.global_step() == 4);  // the step that saw the signal finished
  CHECK(log.informed("Detected SIGINT, attempting graceful shutdown"));
  CHECK(recorder.message->find("interrupted: volt: training interrupted by SIGINT") != std::string::npos);
  CHECK(*recorder.teardowns == 1);
  REQUIRE(std::filesystem::exists(dir.path / "ckpt" / "interrupted.ckpt"));

  // The application's handler is back.
  std::raise(SIGINT);
  CHECK(own_handler_calls == 1);
  std::signal(SIGINT, previous);

  // Resuming from interrupted.ckpt ends where an uninterrupted run ends.
  torch::manual_seed(11);
  auto straight = std::make_shared<SignalModel>();
  {
    volt::Trainer<volt::CPU> uninterrupted(options, volt::ModelCheckpoint{{.dirpath = dir.path / "a"}});
    uninterrupted.fit(straight, data);
    CHECK(!uninterrupted.interrupted());
  }
  // Another seed for the resumed model: only the checkpoint can give it the interrupted run's weights.
  torch::manual_seed(12345);
  auto resumed = std::make_shared<SignalModel>();
  CHECK_FALSE(parameters_equal(*straight, *resumed));
  volt::Trainer<volt::CPU> again(options, volt::ModelCheckpoint{{.dirpath = dir.path / "b"}});
  again.fit(resumed, data, dir.path / "ckpt" / "interrupted.ckpt");
  CHECK(again.global_step() == 12);
  // It trained the 8 steps after the interrupted one (epoch 0 from batch 4 on, then epoch 1), not all 12.
  CHECK(resumed->trained_batches == std::vector<std::int64_t>{4, 5, 0, 1, 2, 3, 4, 5});
  CHECK(parameters_equal(*straight, *resumed));
}

TEST_CASE("SIGTERM stops fit the same way; handle_signals=false leaves the signal to the application") {
  TempDir dir;
  auto data = volt_test::make_batches(5);
  auto options = quiet_options(dir);
  auto model = std::make_shared<SignalModel>();
  model->signal_at_batch = 1;
  model->signal = SIGTERM;
  {
    volt::Trainer<volt::CPU> trainer(options);
    volt_test::CaptureLog log;
    trainer.fit(model, data);
    CHECK(trainer.interrupted());
    CHECK(trainer.stop_reason() == "interrupted by SIGTERM");
    CHECK(trainer.global_step() == 2);
    CHECK(!std::filesystem::exists(dir.path / "checkpoints"));  // checkpointing is off in quiet_options
  }
  static volatile std::sig_atomic_t term_calls = 0;
  auto* previous = std::signal(SIGTERM, [](int) { term_calls = term_calls + 1; });
  options.handle_signals = false;
  volt::Trainer<volt::CPU> trainer(options);
  trainer.fit(model, data);
  CHECK(!trainer.interrupted());
  CHECK(trainer.global_step() == 5);
  CHECK(term_calls == 1);
  std::signal(SIGTERM, previous);
}

// ---- item 5: non-finite losses -------------------------------------------------------------------

TEST_CASE("error_on_nonfinite_loss stops with the step and batch index; off by default") {
  TempDir dir;
  auto options = quiet_options(dir);
  {
    auto model = std::make_shared<NanModel>();
    volt::Trainer<volt::CPU> trainer(options);
    CHECK_NOTHROW(trainer.fit(model, volt_test::make_batches(5)));
    CHECK(trainer.global_step() == 5);
  }
  options.error_on_nonfinite_loss = true;
  auto model = std::make_shared<NanModel>();
  ExceptionRecorder recorder;
  volt::Trainer<volt::CPU> trainer(options, recorder);
  VOLT_CHECK_THROWS_CONTAINS(trainer.fit(model, volt_test::make_batches(5)), std::runtime_error,
                             "the training loss is NaN at global step 3 (epoch 0, batch 3)");
  CHECK(*recorder.teardowns == 1);
}

// ---- item 6: validation up front -----------------------------------------------------------------

TEST_CASE("options and data-dependent settings are rejected up front with MisconfigurationError") {
  TempDir dir;
  auto with = [&](auto change) {
    auto options = quiet_options(dir);
    change(options);
    return options;
  };
  VOLT_CHECK_THROWS_CONTAINS(volt::Trainer<volt::CPU>(with([](auto& o) { o.min_epochs = -2; })),
                             volt::MisconfigurationError, "`min_epochs` must be a non-negative integer");
  VOLT_CHECK_THROWS_CONTAINS(volt::Trainer<volt::CPU>(with([](auto& o) { o.min_steps = -1; })),
                             volt::MisconfigurationError, "`min_steps` must be a non-negative integer");
  VOLT_CHECK_THROWS_CONTAINS(volt::Trainer<volt::CPU>(with([](auto& o) {
                               o.max_steps = 5;
                               o.min_steps = 10;
                             })),
                             volt::MisconfigurationError, "`min_steps` (10) must not exceed `max_steps` (5)");
  VOLT_CHECK_THROWS_CONTAINS(volt::Trainer<volt::CPU>(with([](auto& o) {
                               o.gradient_clip_algorithm = static_cast<volt::GradClipAlgorithm>(7);
                             })),
                             volt::MisconfigurationError,
                             "`gradient_clip_algorithm` 7 is invalid. Allowed algorithms: ['value', 'norm'].");
  VOLT_CHECK_THROWS_CONTAINS(volt::Trainer<volt::CPU>(with([](auto& o) {
                               o.on_checkpoint_failure = static_cast<volt::CheckpointFailure>(5);
                             })),
                             volt::MisconfigurationError, "`on_checkpoint_failure` 5 is invalid");
  write_bytes(dir.path / "a-file", "x");
  VOLT_CHECK_THROWS_CONTAINS(volt::Trainer<volt::CPU>(with([&](auto& o) {
                               o.default_root_dir = (dir.path / "a-file").string();
                             })),
                             volt::MisconfigurationError, "`default_root_dir` must be a directory");
  VOLT_CHECK_THROWS_CONTAINS(volt::Trainer<volt::CPU>(with([](auto& o) { o.accumulate_grad_batches = 0; })),
                             volt::MisconfigurationError, "`accumulate_grad_batches` must be a positive integer");
  VOLT_CHECK_THROWS_CONTAINS(volt::Trainer<volt::CPU>(with([](auto& o) { o.max_epochs = -5; })),
                             volt::MisconfigurationError, "`max_epochs` must be a non-negative integer or -1");
  VOLT_CHECK_THROWS_CONTAINS(volt::Trainer<volt::CPU>(with([](auto& o) { o.limit_val_batches = 1.5; })),
                             volt::MisconfigurationError, "You have passed invalid value 1.5 for limit_val_batches");

  // Checked when fit() sees the data, before any step runs.
  auto model = std::make_shared<volt_test::CountingModel>();
  {
    volt::Trainer<volt::CPU> trainer(with([](auto& o) { o.limit_train_batches = 0.1; }));
    VOLT_CHECK_THROWS_CONTAINS(trainer.fit(model, volt_test::make_batches(5)), volt::MisconfigurationError,
                               "You requested to check 0.1 of the `train_dataloader` but 0.1 * 5 < 1");
    CHECK(trainer.global_step() == 0);
  }
  {
    volt::Trainer<volt::CPU> trainer(with([](auto& o) { o.val_check_interval = 7; }));
    VOLT_CHECK_THROWS_CONTAINS(trainer.fit(model, volt_test::make_batches(5), volt_test::make_batches(2)),
                               std::invalid_argument,
                               " `val_check_interval` (7) must be less than or equal to the number of the training "
                               "batches (5).");
  }
}

// ---- item 7: exceptions carry the epoch and batch; teardown on every path --------------------------

TEST_CASE("exceptions from steps and loaders carry epoch and batch, keep their type, and teardown runs") {
  TempDir dir;
  auto options = quiet_options(dir);
  auto data = volt_test::make_batches(5);
  {
    auto model = std::make_shared<ThrowingStepModel>();
    ExceptionRecorder recorder;
    volt::Trainer<volt::CPU> trainer(options, recorder);
    try {
      trainer.fit(model, data);
      FAIL("fit did not throw");
    } catch (const std::runtime_error& error) {
      const std::string message = error.what();
      CHECK(message.find("custom failure") != std::string::npos);
      CHECK(message.find("epoch 0, training batch 2 (global step 2)") != std::string::npos);
      bool original_found = false;
      try {
        std::rethrow_if_nested(error);
      } catch (const CustomError& original) {
        original_found = std::string(original.what()) == "custom failure";
      }
      CHECK(original_found);
    }
    CHECK(recorder.message->find("training batch 2") != std::string::npos);
    CHECK(*recorder.teardowns == 1);
  }
  {
    auto model = std::make_shared<ThrowingStepModel>();
    model->kind = 1;
    volt::Trainer<volt::CPU> trainer(options);
    VOLT_CHECK_THROWS_CONTAINS(trainer.fit(model, data), c10::Error, "epoch 0, training batch 2");
    VOLT_CHECK_THROWS_CONTAINS(trainer.fit(model, data), c10::Error, "torch check failed");
  }
  {
    auto model = std::make_shared<ThrowingStepModel>();
    model->kind = 2;
    volt::Trainer<volt::CPU> trainer(options);
    VOLT_CHECK_THROWS_CONTAINS(trainer.fit(model, data), std::invalid_argument, "bad argument");
  }
  {
    auto model = std::make_shared<volt_test::Regressor>();
    ExceptionRecorder recorder;
    volt::Trainer<volt::CPU> trainer(options, recorder);
    VOLT_CHECK_THROWS_CONTAINS(trainer.fit(model, ThrowingData{&data, 3}), std::runtime_error,
                               "loader failed reading a sample\n(volt: raised during epoch 0, training batch 3");
    CHECK(*recorder.teardowns == 1);
  }
  {
    auto model = std::make_shared<FailingValidationModel>();
    ExceptionRecorder recorder;
    volt::Trainer<volt::CPU> trainer(options, recorder);
    VOLT_CHECK_THROWS_CONTAINS(trainer.fit(model, data, volt_test::make_batches(3)), std::runtime_error,
                               "validation failure\n(volt: raised during epoch 0, validation batch 1)");
    CHECK(*recorder.teardowns == 1);
  }
}

#include "test_common.hpp"

#include "trainer/trainer_fixtures.hpp"

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#if !defined(_WIN32)
#include <sys/mount.h>
#endif

using volt_test::TempDir;
using volt_test::read_bytes;
using volt_test::write_bytes;
using volt_test::quiet_options;

namespace {

std::size_t files_in(const std::filesystem::path& folder) {
  std::size_t count = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(folder)) ++count;
  return count;
}

/// Trains a Classifier for `epochs` epochs with last.ckpt written every step into `folder`.
std::shared_ptr<volt_test::Classifier> train_with_last(const TempDir& dir, const std::filesystem::path& folder,
                                                       std::int64_t epochs,
                                                       volt::CheckpointFailure failure = volt::CheckpointFailure::raise) {
  torch::manual_seed(3);
  auto model = std::make_shared<volt_test::Classifier>();
  auto options = quiet_options(dir);
  options.max_epochs = epochs;
  options.enable_checkpointing = true;
  options.on_checkpoint_failure = failure;
  volt::Trainer<volt::CPU> trainer(
      options, volt::ModelCheckpoint{{.dirpath = folder, .save_top_k = 0, .save_last = true, .every_n_train_steps = 1}});
  trainer.fit(model, volt_test::make_classification_batches(3, 4));
  return model;
}

struct Wider : torch::nn::Module {
  torch::nn::Linear fc1{torch::nn::Linear(8, 32)};
  torch::nn::Linear fc2{torch::nn::Linear(32, 3)};
  torch::nn::Linear extra{torch::nn::Linear(3, 3)};
  Wider() {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
    register_module("extra", extra);
  }
};

}  // namespace

TEST_CASE("a checkpoint write that fails part-way raises CheckpointError naming the file; the previous one survives") {
  TempDir dir;
  const auto folder = dir.path / "ckpt";
  train_with_last(dir, folder, 1);
  const auto last = folder / "last.ckpt";
  REQUIRE(std::filesystem::exists(last));
  const auto before = read_bytes(last);
  REQUIRE(before.size() > 200);
  {
    volt::testing::ScopedCheckpointWriteFault fault(/*after_bytes=*/100);  // ENOSPC
    const std::string expected = "could not write the checkpoint " + last.string() + ": write failed after 100 of ";
    VOLT_CHECK_THROWS_CONTAINS(train_with_last(dir, folder, 1), volt::CheckpointError, expected.c_str());
    VOLT_CHECK_THROWS_CONTAINS(train_with_last(dir, folder, 1), volt::CheckpointError, "No space left on device");
  }
  CHECK(read_bytes(last) == before);  // untouched
  CHECK(files_in(folder) == 1);       // no temporary file left behind
  // The survivor loads.
  volt_test::Classifier restored;
  CHECK_NOTHROW(volt::load_checkpoint_weights(restored, last));

  // on_checkpoint_failure=warn: the run continues and says why each save failed.
  volt::testing::ScopedCheckpointWriteFault fault(/*after_bytes=*/0, EACCES);
  volt_test::CaptureLog log;
  CHECK_NOTHROW(train_with_last(dir, folder, 1, volt::CheckpointFailure::warn));
  CHECK(log.warned("Permission denied"));
  CHECK(log.warned("training continues (on_checkpoint_failure=warn)"));
  CHECK(read_bytes(last) == before);
}

TEST_CASE("a real full disk (a 1 MiB tmpfs) keeps the previous checkpoint") {
#if defined(_WIN32)
  MESSAGE("skipped: no tmpfs on Windows");
#else
  TempDir dir;
  const auto mount_point = dir.path / "small";
  std::filesystem::create_directories(mount_point);
  if (::mount("tmpfs", mount_point.c_str(), "tmpfs", 0, "size=1m") != 0) {
    MESSAGE("skipped: mounting a tmpfs is not allowed here (" << std::strerror(errno)
                                                               << "); the fault-injection test covers the path");
    return;
  }
  struct Unmount {
    std::filesystem::path path;
    ~Unmount() { ::umount(path.c_str()); }
  } unmount{mount_point};
  // A small model fits; then fill the disk so that the next, same-sized checkpoint cannot be written.
  train_with_last(dir, mount_point, 1);
  const auto last = mount_point / "last.ckpt";
  REQUIRE(std::filesystem::exists(last));
  const auto before = read_bytes(last);
  {
    std::ofstream filler(mount_point / "filler", std::ios::binary);
    const std::string block(4096, 'x');
    while (filler.write(block.data(), static_cast<std::streamsize>(block.size()))) {
    }
  }
  VOLT_CHECK_THROWS_CONTAINS(train_with_last(dir, mount_point, 1), volt::CheckpointError, "No space left on device");
  CHECK(read_bytes(last) == before);
  CHECK(files_in(mount_point) == 2);  // last.ckpt and the filler, no temporary file
#endif
}

TEST_CASE("truncated, corrupted, empty and foreign checkpoint files raise errors naming the file and the fault") {
  TempDir dir;
  const auto folder = dir.path / "ckpt";
  train_with_last(dir, folder, 1);
  const auto good = read_bytes(folder / "last.ckpt");
  auto model = std::make_shared<volt_test::Classifier>();
  volt::Trainer<volt::CPU> trainer(quiet_options(dir));
  auto resume = [&](const std::filesystem::path& path) {
    trainer.fit(model, volt_test::make_classification_batches(3, 4), path);
  };

  const auto empty = dir.path / "empty.ckpt";
  write_bytes(empty, "");
  VOLT_CHECK_THROWS_CONTAINS(resume(empty), volt::CheckpointError, "empty.ckpt is empty");

  const auto foreign = dir.path / "foreign.ckpt";
  write_bytes(foreign, "{\"this\": \"is json\"}");
  VOLT_CHECK_THROWS_CONTAINS(resume(foreign), volt::CheckpointError,
                             "foreign.ckpt is not a readable checkpoint: it does not start with a zip header");

  for (const double fraction : {0.1, 0.5, 0.9, 0.99}) {
    const auto truncated = dir.path / "truncated.ckpt";
    write_bytes(truncated, good.substr(0, static_cast<std::size_t>(static_cast<double>(good.size()) * fraction)));
    CAPTURE(fraction);
    VOLT_CHECK_THROWS_CONTAINS(resume(truncated), volt::CheckpointError, "truncated.ckpt");
  }

  // Corrupt bytes all over the file: every outcome is a CheckpointError naming the file or a clean load.
  std::mt19937 random(7);
  int errors = 0;
  for (int trial = 0; trial < 40; ++trial) {
    auto bytes = good;
    for (int flip = 0; flip < 8; ++flip) bytes[random() % bytes.size()] = static_cast<char>(random());
    const auto corrupted = dir.path / "corrupted.ckpt";
    write_bytes(corrupted, bytes);
    try {
      auto fresh = std::make_shared<volt_test::Classifier>();
      volt::Trainer<volt::CPU> other(quiet_options(dir));
      other.fit(fresh, volt_test::make_classification_batches(3, 4), corrupted);
    } catch (const volt::CheckpointError& error) {
      ++errors;
      CHECK(std::string(error.what()).find("corrupted.ckpt") != std::string::npos);
    }
  }
  MESSAGE(errors << " of 40 corrupted files were rejected, the rest loaded (flips in tensor data)");
  CHECK(errors > 0);

  // A zip archive that is not a volt checkpoint.
  const auto plain = dir.path / "plain.ckpt";
  torch::save(torch::ones({3}), plain.string());
  VOLT_CHECK_THROWS_CONTAINS(resume(plain), volt::CheckpointError, "plain.ckpt is not a volt checkpoint");
}

TEST_CASE("loading into another model names the missing and extra keys and the shape mismatches") {
  TempDir dir;
  const auto folder = dir.path / "ckpt";
  train_with_last(dir, folder, 1);
  const auto last = folder / "last.ckpt";
  Wider wider;
  try {
    volt::load_checkpoint_weights(wider, last);
    FAIL("no error");
  } catch (const volt::CheckpointError& error) {
    const std::string message = error.what();
    CHECK(message.find(last.string() + " does not match the model") != std::string::npos);
    CHECK(message.find("shape mismatch for 'fc1.weight': checkpoint [16, 8], model [32, 8]") != std::string::npos);
    CHECK(message.find("shape mismatch for 'fc2.weight': checkpoint [3, 16], model [3, 32]") != std::string::npos);
    CHECK(message.find("missing submodule 'extra'") != std::string::npos);
    CHECK(message.find("unexpected key 'dropout' in the checkpoint") != std::string::npos);
  }
  // The same check guards resuming in fit().
  struct WiderModel : Wider {
    torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t) {
      return torch::nn::functional::cross_entropy(fc2->forward(fc1->forward(batch.data)), batch.target);
    }
    std::shared_ptr<torch::optim::SGD> configure_optimizers() {
      return std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(0.1));
    }
  };
  auto model = std::make_shared<WiderModel>();
  volt::Trainer<volt::CPU> trainer(quiet_options(dir));
  VOLT_CHECK_THROWS_CONTAINS(trainer.fit(model, volt_test::make_classification_batches(3, 4), last),
                             volt::CheckpointError, "shape mismatch for 'fc1.weight'");
  // A matching model loads.
  volt_test::Classifier same;
  CHECK_NOTHROW(volt::load_checkpoint_weights(same, last));
}

TEST_CASE("CheckpointReader reads a checkpoint's entries and names the file and the entry when one is missing or of another type") {
  torch::serialize::OutputArchive out;
  out.write("loop/epoch", c10::IValue(std::int64_t{7}));
  out.write("loop/at_epoch_end", c10::IValue(true));
  out.write("schedulers/steps", c10::IValue(c10::List<std::int64_t>(std::vector<std::int64_t>{3, 1})));
  out.write("schedulers/none", c10::IValue(c10::List<std::int64_t>(std::vector<std::int64_t>{})));
  out.write("rng/cpu", torch::arange(4, torch::kUInt8), /*is_buffer=*/true);
  torch::serialize::OutputArchive nested;
  nested.write("value", c10::IValue(std::int64_t{5}));
  out.write("precision", nested);
  std::ostringstream stream(std::ios::binary);
  out.save_to(stream);
  torch::serialize::InputArchive archive;
  volt::detail::load_archive_bytes(archive, std::move(stream).str(), "memory.ckpt", torch::kCPU);
  const volt::detail::CheckpointReader reader(archive, "memory.ckpt");

  CHECK(reader.contains("loop/epoch"));
  CHECK(reader.contains("precision"));
  CHECK_FALSE(reader.contains("volt/format"));
  CHECK(reader.read_int("loop/epoch") == 7);
  CHECK(reader.read_bool("loop/at_epoch_end"));
  CHECK(reader.read_int_list("schedulers/steps") == std::vector<std::int64_t>{3, 1});
  CHECK(reader.read_int_list("schedulers/none").empty());
  CHECK(torch::equal(reader.read_tensor("rng/cpu"), torch::arange(4, torch::kUInt8)));
  torch::serialize::InputArchive precision;
  reader.read_archive("precision", precision);
  CHECK(volt::detail::CheckpointReader(precision, "memory.ckpt").read_int("value") == 5);
  torch::serialize::InputArchive optional;
  CHECK(reader.try_read_archive("precision", optional));
  CHECK_FALSE(reader.try_read_archive("callbacks/none", optional));
  CHECK_FALSE(reader.try_read_archive("loop/epoch", optional));

  const std::string prefix = "volt: memory.ckpt is not a volt checkpoint or is corrupted: entry ";
  // Missing entries.
  VOLT_CHECK_THROWS_CONTAINS(reader.read_int("loop/global_step"), volt::CheckpointError,
                             (prefix + "'loop/global_step' is missing or not an integer").c_str());
  VOLT_CHECK_THROWS_CONTAINS(reader.read_bool("volt/weights_only"), volt::CheckpointError,
                             (prefix + "'volt/weights_only' is missing or not a bool").c_str());
  VOLT_CHECK_THROWS_CONTAINS(reader.read_int_list("schedulers/intervals"), volt::CheckpointError,
                             (prefix + "'schedulers/intervals' is missing or not a list of integers").c_str());
  VOLT_CHECK_THROWS_CONTAINS(reader.read_tensor("rng/cpu_epoch_start"), volt::CheckpointError,
                             (prefix + "'rng/cpu_epoch_start' is missing or not a tensor").c_str());
  VOLT_CHECK_THROWS_CONTAINS(reader.read_archive("optimizer", optional), volt::CheckpointError,
                             (prefix + "'optimizer' is missing or not an archive").c_str());
  // Entries of another type.
  VOLT_CHECK_THROWS_CONTAINS(reader.read_int("loop/at_epoch_end"), volt::CheckpointError,
                             (prefix + "'loop/at_epoch_end' is missing or not an integer").c_str());
  VOLT_CHECK_THROWS_CONTAINS(reader.read_bool("loop/epoch"), volt::CheckpointError,
                             (prefix + "'loop/epoch' is missing or not a bool").c_str());
  VOLT_CHECK_THROWS_CONTAINS(reader.read_int_list("loop/epoch"), volt::CheckpointError,
                             (prefix + "'loop/epoch' is missing or not a list of integers").c_str());
  VOLT_CHECK_THROWS_CONTAINS(reader.read_tensor("precision"), volt::CheckpointError,
                             (prefix + "'precision' is missing or not a tensor").c_str());
  VOLT_CHECK_THROWS_CONTAINS(reader.read_archive("rng/cpu", optional), volt::CheckpointError,
                             (prefix + "'rng/cpu' is missing or not an archive").c_str());
}

// Logs on a full disk: every logger reports the failed write, naming the file and the system error, and
// keeps what it wrote before. Uses a 200 KiB tmpfs (needs the right to mount: root, as in CI); skips with a
// message elsewhere.
#include "test_common.hpp"

#include "trainer/trainer_fixtures.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

#if !defined(_WIN32)
#include <sys/mount.h>
#endif

using volt_test::TempDir;
using volt_test::read_bytes;
using volt_test::quiet_options;

namespace {

#if !defined(_WIN32)
/// A 200 KiB tmpfs at `<dir>/small`, unmounted at scope exit; `mounted` is false where mounting is refused.
struct SmallDisk {
  std::filesystem::path path;
  bool mounted = false;
  explicit SmallDisk(const TempDir& dir) : path(dir.path / "small") {
    std::filesystem::create_directories(path);
    mounted = ::mount("tmpfs", path.c_str(), "tmpfs", 0, "size=200k") == 0;
    if (!mounted) MESSAGE("skipped: mounting a tmpfs is not allowed here (" << std::strerror(errno) << ")");
  }
  ~SmallDisk() {
    if (mounted) ::umount(path.c_str());
  }
  /// Fills the disk: the next write of any size fails with ENOSPC.
  void fill() const {
    std::ofstream filler(path / "filler", std::ios::binary);
    const std::string block(1024, 'x');
    while (filler.write(block.data(), static_cast<std::streamsize>(block.size()))) {
    }
  }
  SmallDisk(const SmallDisk&) = delete;
  SmallDisk& operator=(const SmallDisk&) = delete;
};
#endif

}  // namespace

#if !defined(_WIN32)
TEST_CASE("a full disk makes the CSV logger's hparams.yaml write fail loudly: fit throws naming the file") {
  TempDir dir;
  SmallDisk disk(dir);
  if (!disk.mounted) return;
  std::filesystem::create_directories(disk.path / "lightning_logs" / "version_0");
  disk.fill();
  auto model = std::make_shared<volt_test::Regressor>();
  auto options = quiet_options(dir);
  options.logger = true;
  volt::Trainer<volt::CPU> trainer(options, volt::CSVLogger{{.save_dir = disk.path, .version = 0}});
  const std::string expected = "could not write the log file " +
                               (disk.path / "lightning_logs" / "version_0" / "hparams.yaml").string() +
                               ": No space left on device";
  VOLT_CHECK_THROWS_CONTAINS(trainer.fit(model, volt_test::make_batches(3)), std::runtime_error, expected.c_str());
}

TEST_CASE("a full disk makes metrics.csv writes fail loudly; the rows written before stay whole") {
  TempDir dir;
  SmallDisk disk(dir);
  if (!disk.mounted) return;
  volt::CSVLogger logger({.save_dir = disk.path, .version = 0, .flush_logs_every_n_steps = 1000});
  logger.log_hyperparams({{"lr", "0.1"}});
  logger.log_metrics({{"loss", 1.5}}, 0);
  logger.save();
  const auto metrics = logger.log_dir() / "metrics.csv";
  const std::string before = read_bytes(metrics);
  REQUIRE(before == "step,loss\n0,1.5\n");
  disk.fill();
  // Appending rows (the same columns) and rewriting the file (a new column) both fail, naming the file.
  for (int step = 1; step < 200; ++step) logger.log_metrics({{"loss", 1.0 / step}}, step);
  const std::string expected = "could not write the log file " + metrics.string() + ": No space left on device";
  VOLT_CHECK_THROWS_CONTAINS(logger.save(), std::runtime_error, expected.c_str());
  CHECK(read_bytes(metrics) == before);
  logger.log_metrics({{"acc", 0.5}}, 200);
  VOLT_CHECK_THROWS_CONTAINS(logger.save(), std::runtime_error, expected.c_str());
  CHECK(read_bytes(metrics) == before);
  // Space again: the buffered rows are all written.
  std::filesystem::remove(disk.path / "filler");
  logger.save();
  const std::string after = read_bytes(metrics);
  CHECK(after.rfind("step,loss,acc\n0,1.5,\n1,1,\n", 0) == 0);
  CHECK(after.find("\n200,,0.5\n") != std::string::npos);
  // No temporary file is left in the log folder.
  for (const auto& entry : std::filesystem::directory_iterator(logger.log_dir())) {
    CHECK(entry.path().filename().string().find(".tmp") == std::string::npos);
  }
}

TEST_CASE("a full disk makes the TensorBoard logger's writes fail loudly") {
  TempDir dir;
  SmallDisk disk(dir);
  if (!disk.mounted) return;
  {
    volt::TensorBoardLogger logger({.save_dir = disk.path, .version = 0});
    std::filesystem::create_directories(logger.log_dir());
    disk.fill();
    const std::string yaml = "could not write the log file " + (logger.log_dir() / "hparams.yaml").string() +
                             ": No space left on device";
    VOLT_CHECK_THROWS_CONTAINS(logger.log_hyperparams({{"lr", "0.1"}}), std::runtime_error, yaml.c_str());
    // The event file's buffer overflows during log_metrics or is flushed by save(): either one reports it.
    std::string what;
    try {
      for (int step = 0; step < 2000; ++step) logger.log_metrics({{"loss", 1.0 / (step + 1)}}, step);
      logger.save();
    } catch (const std::runtime_error& error) {
      what = error.what();
    }
    CHECK(what.find("could not write the log file " + logger.event_file().string() + ": No space left on device") !=
          std::string::npos);
  }
}
#endif

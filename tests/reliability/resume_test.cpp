// Resuming keeps the earlier run's files and makes the checkpoint decisions of an uninterrupted run.
#include "test_common.hpp"

#include "trainer/trainer_fixtures.hpp"

#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

using volt_test::TempDir;
using volt_test::read_bytes;
using volt_test::quiet_options;

namespace {

std::set<std::string> names_in(const std::filesystem::path& folder) {
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) names.insert(entry.path().filename().string());
  return names;
}

/// A fit of CountingModel (5 batches an epoch, one validation batch, val_score by epoch) up to `epochs`.
void fit_counting(const TempDir& dir, std::int64_t epochs, volt::ModelCheckpointOptions checkpoint,
                  const std::vector<double>& scores, const std::filesystem::path& ckpt_path = {},
                  bool with_logger = false, const std::filesystem::path& save_after = {}) {
  torch::manual_seed(5);
  auto model = std::make_shared<volt_test::CountingModel>();
  model->val_metric_by_epoch = scores;
  auto options = quiet_options(dir);
  options.max_epochs = epochs;
  options.num_sanity_val_steps = 0;
  options.enable_checkpointing = true;
  options.logger = with_logger;
  volt::Trainer<volt::CPU> trainer(options, volt::ModelCheckpoint{std::move(checkpoint)});
  trainer.fit(model, volt_test::make_batches(5), volt_test::make_batches(1), ckpt_path);
  if (!save_after.empty()) trainer.save_checkpoint(save_after);
}

}  // namespace

TEST_CASE("resuming into a new version_N restores only best_model_path, warns as Lightning does, and deletes "
          "nothing of the earlier run") {
  TempDir dir;
  const volt::ModelCheckpointOptions checkpoint{.monitor = "val_score", .mode = "max", .save_top_k = 1,
                                                .save_last = true};
  const std::vector<double> scores{1.0, 2.0, 3.0, 4.0};
  fit_counting(dir, 2, checkpoint, scores, {}, /*with_logger=*/true);
  const auto first = dir.path / "lightning_logs" / "version_0" / "checkpoints";
  REQUIRE(names_in(first) == std::set<std::string>{"epoch=1-step=10.ckpt", "last.ckpt"});
  const auto best_before = read_bytes(first / "epoch=1-step=10.ckpt");

  volt_test::CaptureLog log;
  fit_counting(dir, 4, checkpoint, scores, first / "last.ckpt", /*with_logger=*/true);
  const auto second = dir.path / "lightning_logs" / "version_1" / "checkpoints";
  CHECK(log.warned("The dirpath has changed from '" + first.string() + "' to '" + second.string() +
                   "', therefore `best_model_score`, `kth_best_model_path`, `kth_value`, `last_model_path` and "
                   "`best_k_models` won't be reloaded. Only `best_model_path` will be reloaded."));
  // The earlier run's best checkpoint is still there, unchanged; the new run keeps its own top 1.
  CHECK(names_in(first) == std::set<std::string>{"epoch=1-step=10.ckpt", "last.ckpt"});
  CHECK(read_bytes(first / "epoch=1-step=10.ckpt") == best_before);
  CHECK(names_in(second) == std::set<std::string>{"epoch=3-step=20.ckpt", "last.ckpt"});
}

TEST_CASE("a resume after a kill between a top-k save and last.ckpt keeps save_top_k files and no temporary file") {
  const volt::ModelCheckpointOptions base{.monitor = "val_score", .mode = "max", .save_top_k = 1, .save_last = true};
  const std::vector<double> scores{1.0, 3.0, 2.0, 4.0};
  TempDir reference_dir;
  auto reference = base;
  reference.dirpath = reference_dir.path / "ckpt";
  fit_counting(reference_dir, 4, reference, scores);
  const auto expected = names_in(reference.dirpath);
  REQUIRE(expected == std::set<std::string>{"epoch=3-step=20.ckpt", "last.ckpt"});

  TempDir dir;
  auto options = base;
  options.dirpath = dir.path / "ckpt";
  const auto folder = options.dirpath;
  fit_counting(dir, 2, options, scores);  // epoch=1-step=10.ckpt and last.ckpt at step 10
  const auto saved_last = dir.path / "last-at-step-10.ckpt";
  const auto saved_best = dir.path / "best-at-step-10.ckpt";
  std::filesystem::copy_file(folder / "last.ckpt", saved_last);
  std::filesystem::copy_file(folder / "epoch=1-step=10.ckpt", saved_best);
  // The attempt that gets killed: it runs on and writes epoch=3-step=20.ckpt; its last.ckpt of step 20 is
  // then lost (the kill came before it), as is the removal of the old best.
  fit_counting(dir, 4, options, scores, folder / "last.ckpt");
  REQUIRE(std::filesystem::exists(folder / "epoch=3-step=20.ckpt"));
  std::filesystem::copy_file(saved_last, folder / "last.ckpt", std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(saved_best, folder / "epoch=1-step=10.ckpt");
  { std::ofstream(folder / ".last.ckpt.tmp123456789") << "torn"; }  // a write killed before its rename
  { std::ofstream(folder / ".epoch=3-step=20.ckpt.tmp42") << "torn"; }

  fit_counting(dir, 4, options, scores, folder / "last.ckpt");
  // As the uninterrupted run: one top-k file (rewritten under its own name, no -v1 copy), last.ckpt, and
  // none of the temporary files.
  CHECK(names_in(folder) == expected);
}

TEST_CASE("a run resumed from a checkpoint written after validation makes the every-n-steps top-k saves of an "
          "uninterrupted run") {
  // Epoch 0's validation scores 3, later ones less: the top 2 are the first two saves after epoch 0's
  // validation (steps 6 and 8). A resumed run that forgot the last validation's value would skip those saves
  // ("could not find the monitored key") and keep steps 12 and 14 instead.
  const std::vector<double> scores{3.0, 1.0, 2.0};
  volt::ModelCheckpointOptions base{.monitor = "val_score", .mode = "max", .save_top_k = 2,
                                    .every_n_train_steps = 2};
  TempDir reference_dir;
  auto reference = base;
  reference.dirpath = reference_dir.path / "ckpt";
  fit_counting(reference_dir, 3, reference, scores);
  const auto expected = names_in(reference.dirpath);
  REQUIRE(expected == std::set<std::string>{"epoch=1-step=6.ckpt", "epoch=1-step=8.ckpt"});

  TempDir dir;
  auto options = base;
  options.dirpath = dir.path / "ckpt";
  const auto resume_from = dir.path / "after-epoch-0.ckpt";
  fit_counting(dir, 1, options, scores, {}, false, resume_from);
  volt_test::CaptureLog log;
  fit_counting(dir, 3, options, scores, resume_from);
  CHECK_FALSE(log.warned("could not find the monitored key"));
  CHECK(names_in(options.dirpath) == expected);
}

namespace {

/// Two fits of CountingModel over 5 batches an epoch with `options`: one uninterrupted for `epochs`, one
/// resumed from the checkpoint `resume_name` the first wrote into its ModelCheckpoint folder. Checks that the
/// resumed run validates where the uninterrupted one did after that checkpoint, and ends with its weights.
void check_resume_matches(volt::TrainerOptions options, volt::ModelCheckpointOptions checkpoint, std::int64_t epochs,
                          const std::string& resume_name,
                          const std::vector<std::int64_t>& expected_validation_epochs,
                          const std::vector<std::int64_t>& expected_resumed_epochs) {
  TempDir dir;
  checkpoint.dirpath = dir.path / "ckpt";
  options.default_root_dir = dir.path;
  options.max_epochs = epochs;
  options.num_sanity_val_steps = 0;
  options.enable_checkpointing = true;
  options.logger = false;
  auto fit = [&](const std::filesystem::path& ckpt_path) {
    torch::manual_seed(5);
    auto model = std::make_shared<volt_test::CountingModel>();
    volt::Trainer<volt::CPU> trainer(options, volt::ModelCheckpoint{checkpoint});
    trainer.fit(model, volt_test::make_batches(5), volt_test::make_batches(1), ckpt_path);
    return model;
  };
  const auto reference = fit({});
  REQUIRE(reference->validation_epochs == expected_validation_epochs);
  const auto saved = dir.path / "resume-from.ckpt";
  std::filesystem::copy_file(checkpoint.dirpath / resume_name, saved);
  const auto resumed = fit(saved);
  CHECK(resumed->validation_epochs == expected_resumed_epochs);
  CHECK(torch::equal(resumed->linear->weight, reference->linear->weight));
  CHECK(torch::equal(resumed->linear->bias, reference->linear->bias));
}

}  // namespace

TEST_CASE("a run resumed from an every-n-steps checkpoint of an epoch's last batch runs that epoch's validation") {
  // The save in on_train_batch_end of batch 4 comes before epoch 0's validation, which the uninterrupted run
  // then runs: so does the resumed one, before epoch 1 (Lightning 2.6.6 skips it: there the resumed run
  // validates only in epoch 1).
  TempDir dir;
  auto options = quiet_options(dir);
  check_resume_matches(options, {.save_top_k = -1, .every_n_train_steps = 5}, 2, "epoch=0-step=5.ckpt", {0, 1},
                       {0, 1});
  // Mid-epoch too: validation after batches 1 and 3 of each epoch, a save every 2 steps, resumed from the one
  // in batch 3's on_train_batch_end.
  options.val_check_interval = std::int64_t{2};
  check_resume_matches(options, {.save_top_k = -1, .every_n_train_steps = 2}, 2, "epoch=0-step=4.ckpt",
                       {0, 0, 1, 1}, {0, 1, 1});
}

TEST_CASE("a resumed run keeps counting val_check_interval across epochs from the checkpoint's batch count") {
  // check_val_every_n_epoch unset: validation after every 3 batches of the whole fit (batches 3, 6 and 9 of
  // 10), so epoch 1 validates at its batches 0 and 3. A resume that counted from 0 would validate at its
  // batch 2 instead.
  TempDir dir;
  auto options = quiet_options(dir);
  options.check_val_every_n_epoch = std::nullopt;
  options.val_check_interval = std::int64_t{3};
  check_resume_matches(options, {.save_top_k = -1, .every_n_train_steps = 5}, 2, "epoch=0-step=5.ckpt", {0, 1, 1},
                       {1, 1});
}

namespace {

/// ReduceLROnPlateau of interval step, every 2 batches, on val_score in mode max; val_score falls with each
/// validation (the global step's negative), so each check after the first halves the rate.
struct StepPlateauModel : volt_test::Regressor {
  std::shared_ptr<torch::optim::SGD> optimizer;
  void validation_step(const torch::data::Example<>&, std::int64_t, volt::StepContext& ctx) {
    ctx.log("val_score", -static_cast<double>(ctx.global_step()));
  }
  volt::OptimizerConfig configure_optimizers() {
    optimizer = std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(0.1));
    auto plateau = std::make_shared<volt::optim::ReduceLROnPlateau>(
        *optimizer, volt::optim::ReduceLROnPlateauOptions{.mode = "max", .factor = 0.5, .patience = 0});
    volt::LRSchedulerConfig scheduler{plateau};
    scheduler.monitor = "val_score";
    scheduler.interval = volt::SchedulerInterval::step;
    scheduler.frequency = 2;
    volt::OptimizerConfig config{optimizer};
    config.lr_schedulers.push_back(scheduler);
    return config;
  }
};

}  // namespace

TEST_CASE("a run resumed from a checkpoint written in a mid-epoch validation steps the plateau scheduler that "
          "followed it") {
  TempDir dir;
  auto options = quiet_options(dir);
  options.max_epochs = 1;
  options.num_sanity_val_steps = 0;
  options.val_check_interval = std::int64_t{2};
  options.enable_checkpointing = true;
  options.logger = false;
  // Validation after batches 1 and 3, each saved in on_validation_end; the plateau scheduler steps after each
  // validation, so the resumed run must step it before batch 4.
  const volt::ModelCheckpointOptions checkpoint{.dirpath = dir.path / "ckpt", .save_top_k = -1};
  auto fit = [&](const std::filesystem::path& ckpt_path) {
    torch::manual_seed(3);
    auto model = std::make_shared<StepPlateauModel>();
    volt::Trainer<volt::CPU> trainer(options, volt::ModelCheckpoint{checkpoint});
    trainer.fit(model, volt_test::make_batches(5), volt_test::make_batches(2), ckpt_path);
    return model;
  };
  const auto reference = fit({});
  const double reference_lr = reference->optimizer->param_groups()[0].options().get_lr();
  REQUIRE(reference_lr == doctest::Approx(0.05));  // halved at the check after batch 3
  const auto saved = dir.path / "in-validation.ckpt";
  std::filesystem::copy_file(dir.path / "ckpt" / "epoch=0-step=4.ckpt", saved);
  const auto resumed = fit(saved);
  CHECK(resumed->optimizer->param_groups()[0].options().get_lr() == reference_lr);
  CHECK(torch::equal(resumed->linear->weight, reference->linear->weight));
  CHECK(torch::equal(resumed->linear->bias, reference->linear->bias));
}

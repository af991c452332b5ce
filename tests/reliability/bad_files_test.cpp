// Files that are not what the run needs get errors that say what they are and what to do.
#include "test_common.hpp"

#include "trainer/trainer_fixtures.hpp"

#include <string>

using volt_test::TempDir;
using volt_test::quiet_options;

namespace {

template <class Precision>
void fit_classifier(const TempDir& dir, const std::filesystem::path& save_to, const std::filesystem::path& resume = {},
                    std::shared_ptr<volt_test::Classifier> model = nullptr) {
  if (!model) model = std::make_shared<volt_test::Classifier>();
  auto options = quiet_options(dir);
  volt::Trainer<volt::CPU, volt::SingleDevice, Precision> trainer(options);
  trainer.fit(model, volt_test::make_classification_batches(2, 4), resume);
  if (!save_to.empty()) trainer.save_checkpoint(save_to);
}

}  // namespace

TEST_CASE("a 64-true checkpoint resumed at 32-true or bf16-mixed is refused at load, naming both precisions") {
  TempDir dir;
  const auto path = dir.path / "fp64.ckpt";
  fit_classifier<volt::FP64>(dir, path);
  auto model = std::make_shared<volt_test::Classifier>();
  const auto weights_before = model->fc1->weight.detach().clone();
  const std::string fp32 = "volt: cannot resume from " + path.string() +
                           " at precision '32-true': it was written at precision '64-true' ('fc1.weight' is Double "
                           "there, Float here); resume at the precision it was written with";
  VOLT_CHECK_THROWS_CONTAINS(fit_classifier<volt::FP32>(dir, {}, path, model), volt::CheckpointError, fp32.c_str());
  // Nothing was loaded: the model keeps its float32 weights.
  CHECK((model->fc1->weight.scalar_type() == torch::kFloat));
  CHECK(torch::equal(model->fc1->weight.detach(), weights_before));
  VOLT_CHECK_THROWS_CONTAINS(fit_classifier<volt::BF16Autocast>(dir, {}, path), volt::CheckpointError,
                             "at precision 'bf16-mixed': it was written at precision '64-true'");
  // The same precision resumes.
  CHECK_NOTHROW(fit_classifier<volt::FP64>(dir, {}, path));
}

TEST_CASE("a volt::save_weights file given as a checkpoint is named as a weights file") {
  TempDir dir;
  volt_test::Classifier model;
  const auto path = dir.path / "weights.pt";
  volt::save_weights(model, path);
  const std::string expected = "volt: " + path.string() + " is a weights file (a state_dict in torch.save's format";
  VOLT_CHECK_THROWS_CONTAINS(fit_classifier<volt::FP32>(dir, {}, path), volt::CheckpointError, expected.c_str());
  VOLT_CHECK_THROWS_CONTAINS(volt::load_checkpoint_weights(model, path), volt::CheckpointError,
                             "load it with volt::load_weights(model, path)");
}

TEST_CASE("an unreadable checkpoint file gives the system's reason") {
#if defined(__linux__)
  // /proc/self/mem is a regular file whose first page cannot be read (EIO), for any user, root included.
  volt_test::Classifier model;
  VOLT_CHECK_THROWS_CONTAINS(volt::load_checkpoint_weights(model, "/proc/self/mem"), volt::CheckpointError,
                             "volt: cannot read the checkpoint file /proc/self/mem: Input/output error");
#else
  MESSAGE("skipped: needs Linux's /proc/self/mem");
#endif
}

TEST_CASE("16-true on a CPU without float16 matrix multiplication is refused when the Trainer is set up") {
  bool half_matmul = true;
  try {
    const auto probe = torch::ones({2, 2}, torch::kHalf);
    (void)torch::addmm(probe, probe, probe);
  } catch (const std::exception&) {
    half_matmul = false;
  }
  TempDir dir;
  if (half_matmul) {
    MESSAGE("this LibTorch multiplies float16 matrices on the CPU: 16-true is accepted there");
    CHECK_NOTHROW((volt::Trainer<volt::CPU, volt::SingleDevice, volt::FP16True>(quiet_options(dir))));
    return;
  }
  auto options = quiet_options(dir);
  VOLT_CHECK_THROWS_CONTAINS((volt::Trainer<volt::CPU, volt::SingleDevice, volt::FP16True>(options)),
                             volt::MisconfigurationError,
                             "volt: precision '16-true' on the CPU needs float16 matrix multiplication, which this "
                             "LibTorch");
}

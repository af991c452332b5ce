// Files that are not what the run needs get errors that say what they are and what to do.
#include "test_common.hpp"

#include "reliability/legacy_checkpoint.hpp"

#include "trainer/trainer_fixtures.hpp"

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

using volt_test::TempDir;
using volt_test::read_bytes;
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

namespace {
/// The [begin, end) byte ranges of the deflated entries of the zip archive `bytes` (method 8).
std::vector<std::pair<std::size_t, std::size_t>> deflated_entries(const std::string& bytes) {
  const auto u16 = [&](std::size_t at) {
    return static_cast<std::size_t>(static_cast<unsigned char>(bytes[at])) |
           static_cast<std::size_t>(static_cast<unsigned char>(bytes[at + 1])) << 8;
  };
  const auto u32 = [&](std::size_t at) { return u16(at) | u16(at + 2) << 16; };
  std::vector<std::pair<std::size_t, std::size_t>> out;
  std::size_t end = bytes.size() - 22;
  while (u32(end) != 0x06054b50U) --end;
  std::size_t at = u32(end + 16);
  for (std::size_t entry = 0; entry < u16(end + 10); ++entry) {
    const std::size_t local = u32(at + 42);
    const std::size_t data = local + 30 + u16(local + 26) + u16(local + 28);
    if (u16(at + 10) == 8) out.emplace_back(data, data + u32(at + 20));
    at += 46 + u16(at + 28) + u16(at + 30) + u16(at + 32);
  }
  return out;
}

/// Whether every parameter of `a` equals `b`'s.
bool same_parameters(const torch::nn::Module& a, const torch::nn::Module& b) {
  const auto left = a.named_parameters();
  const auto right = b.named_parameters();
  for (const auto& item : left) {
    if (!torch::equal(item.value(), right[item.key()])) return false;
  }
  return left.size() == right.size();
}

struct FlipCounts {
  int flips = 0;
  int rejected = 0;  // a CheckpointError whose message holds one of the expected phrases
  int harmless = 0;  // loaded the weights of the undamaged file (the flip hit bits that carry no data)
};

/// Flips one bit at a time in the checkpoint `good`, at `per_entry` evenly spaced bytes of each of `ranges` and
/// each bit of `bits`, writes the damaged copy to `file` and loads it into a fresh Net.
template <class Net>
FlipCounts flip_and_load(const std::string& good, const std::vector<std::pair<std::size_t, std::size_t>>& ranges,
                         std::size_t per_entry, std::initializer_list<int> bits, const std::filesystem::path& file,
                         const Net& reference, std::initializer_list<std::string> phrases) {
  FlipCounts counts;
  for (const auto& [begin, end] : ranges) {
    for (std::size_t at = begin; at < end; at += std::max<std::size_t>(1, (end - begin) / per_entry)) {
      for (const int bit : bits) {
        std::string damaged = good;
        damaged[at] = static_cast<char>(damaged[at] ^ (1 << bit));
        volt_test::write_bytes(file, damaged);
        ++counts.flips;
        Net model;
        try {
          volt::load_checkpoint_weights(model, file);
          if (same_parameters(model, reference)) ++counts.harmless;
        } catch (const volt::CheckpointError& error) {
          const std::string what = error.what();
          if (std::any_of(phrases.begin(), phrases.end(),
                          [&](const std::string& phrase) { return what.find(phrase) != std::string::npos; })) {
            ++counts.rejected;
          }
        }
      }
    }
  }
  return counts;
}
}  // namespace

TEST_CASE("a flipped bit inside a compressed entry of a checkpoint is a CheckpointError, not a crash") {
  TempDir dir;
  const auto path = dir.path / "good.ckpt";
  fit_classifier<volt::FP32>(dir, dir.path / "current.ckpt");
  // Compressed entries exist in the earlier format only (LibTorch archives), still read with a warning.
  volt_test::write_legacy_checkpoint(dir.path / "current.ckpt", path);
  const std::string good = read_bytes(path);
  const auto entries = deflated_entries(good);
  REQUIRE_FALSE(entries.empty());  // LibTorch deflates an archive's code/*.py entries
  volt_test::Classifier reference;
  volt::load_checkpoint_weights(reference, path);
  const auto [flips, rejected, harmless] = flip_and_load(good, entries, 16, {0, 3, 6}, dir.path / "damaged.ckpt", reference,
                                                         {"is damaged", "fails its CRC-32 check"});
  CHECK(rejected + harmless == flips);
  CHECK(rejected >= flips * 9 / 10);
  MESSAGE(rejected << " of " << flips << " flips in " << entries.size() << " compressed entries rejected, " << harmless
                   << " in bits without data loaded the same weights");
  // The two inputs that crashed LibTorch 1.13's TorchScript type parser are rejected before it.
  if (const char* source = std::getenv("VOLT_TEST_SOURCE_DIR")) {
    for (const char* name : {"libtorch-1.13-script-type-parser-segv.ckpt", "libtorch-1.13-script-type-parser-segv-valid-crc.ckpt"}) {
      volt_test::Classifier model;
      CHECK_THROWS_AS(volt::load_checkpoint_weights(model, std::filesystem::path(source) / "fuzz" / "known_crashes" / name),
                      volt::CheckpointError);
    }
  } else {
    MESSAGE("VOLT_TEST_SOURCE_DIR not set: the known crash inputs are not checked");
  }
}

namespace {
/// The model of the seed checkpoints in fuzz/corpus/checkpoint (tests/reliability/programs/sigkill_resume.cpp).
struct SeedNet : torch::nn::Module {
  torch::nn::Linear fc1{register_module("fc1", torch::nn::Linear(8, 32))};
  torch::nn::Dropout dropout{register_module("dropout", torch::nn::Dropout(0.25))};
  torch::nn::Linear fc2{register_module("fc2", torch::nn::Linear(32, 3))};
};
}  // namespace

TEST_CASE("a torch.save checkpoint re-zipped with deflate loads the same weights; flips in its compressed data are rejected") {
  const char* source = std::getenv("VOLT_TEST_SOURCE_DIR");
  if (source == nullptr) {
    MESSAGE("VOLT_TEST_SOURCE_DIR not set: the seed checkpoints are not found");
    return;
  }
  // The same checkpoint twice: as volt writes it (stored entries) and as Python's zipfile rewrote it with
  // ZIP_DEFLATED (fuzz/corpus/checkpoint holds both as the fuzzer's seeds).
  const auto corpus = std::filesystem::path(source) / "fuzz" / "corpus" / "checkpoint";
  SeedNet stored;
  volt::load_checkpoint_weights(stored, corpus / "full-step28.ckpt");
  const auto deflated_path = corpus / "full-step28-deflated.ckpt";
  SeedNet reference;
  volt::load_checkpoint_weights(reference, deflated_path);
  CHECK(torch::equal(reference.fc1->weight, stored.fc1->weight));
  CHECK(torch::equal(reference.fc2->bias, stored.fc2->bias));
  CHECK_FALSE(torch::equal(reference.fc1->weight, SeedNet().fc1->weight));

  const std::string good = read_bytes(deflated_path);
  const auto entries = deflated_entries(good);
  REQUIRE(entries.size() >= 10);  // data.pkl and the tensors' storages
  TempDir dir;
  const auto file = dir.path / "damaged.ckpt";
  const auto [flips, rejected, harmless] = flip_and_load(good, entries, 8, {1, 5}, file, reference, {file.string()});
  CHECK(rejected + harmless == flips);
  CHECK(rejected >= flips * 9 / 10);
  MESSAGE(rejected << " of " << flips << " flips in " << entries.size() << " deflated entries rejected, " << harmless
                   << " loaded the same weights");
}

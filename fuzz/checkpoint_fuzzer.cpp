// libFuzzer target for volt's checkpoint loader: the bytes of a checkpoint file go through the same checks
// fit(ckpt_path=...) and volt::load_checkpoint_weights use (detail::load_archive_bytes: volt's zip reader with
// its CRC-32 checks, the DEFLATE decoder, the restricted unpickler, the checkpoint layout, the rebuilt archive;
// then the volt entries, the key and shape comparison with a model, Module::load).
//
// The property: every input either loads or raises volt::CheckpointError (any other exception aborts, and
// libFuzzer reports it as a crash); no crash, hang or AddressSanitizer report. Seeds are real checkpoints
// (fuzz/corpus/checkpoint).
//
// Build and run: fuzz/run_checkpoint_fuzzer.sh (clang with -fsanitize=fuzzer,address).
#include <torch/torch.h>

#include <volt/serialization/checkpoint_io.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

namespace {

/// The model of the seed checkpoints (tests/reliability/programs/sigkill_resume.cpp's Net).
struct Net : torch::nn::Module {
  torch::nn::Linear fc1{torch::nn::Linear(8, 32)};
  torch::nn::Dropout dropout{torch::nn::Dropout(0.25)};
  torch::nn::Linear fc2{torch::nn::Linear(32, 3)};
  Net() {
    register_module("fc1", fc1);
    register_module("dropout", dropout);
    register_module("fc2", fc2);
  }
};

/// What volt's loaders do with the bytes of a checkpoint: every rejection must be a volt::CheckpointError.
void exercise(const std::string& bytes) {
  // Checkpoints of volt's earlier format (LibTorch archives) go to LibTorch's reader, which is not hardened
  // against crafted input (fuzz/known_crashes): the target covers volt's own readers unless
  // VOLT_FUZZ_LEGACY=1.
  static const bool legacy = std::getenv("VOLT_FUZZ_LEGACY") != nullptr;
  if (!legacy && bytes.size() >= 4 && bytes.compare(0, 4, "PK\x03\x04") == 0) {
    const auto entries = volt::detail::read_zip_entries(bytes, "<fuzz input>");
    if (!volt::detail::is_torch_save_file(entries)) return;
  }
  torch::serialize::InputArchive archive;
  volt::detail::load_archive_bytes(archive, bytes, "<fuzz input>", torch::kCPU);
  const volt::detail::CheckpointReader reader(archive, "<fuzz input>");
  Net net;
  volt::detail::load_weights_from_archive(net, archive, "<fuzz input>");
  (void)net.fc1->weight.sum().item<float>();
  // The entries a resume reads (CheckpointConnector::read), through the same reader.
  for (const char* key : {"loop/epoch", "loop/global_step", "loop/batches_done"}) (void)reader.read_int(key);
  (void)reader.read_bool("loop/at_epoch_end");
  (void)reader.read_int_list("schedulers/steps");
  (void)reader.read_tensor("rng/cpu").numel();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    exercise(bytes);
  } catch (const volt::CheckpointError&) {
    // Rejected with volt's error: the expected outcome for a bad file.
  } catch (const std::exception& error) {
    // Any other exception breaks the promise that volt names every rejection.
    std::fprintf(stderr, "rejected with an exception other than volt::CheckpointError: %s\n", error.what());
    std::abort();
  }
  return 0;
}

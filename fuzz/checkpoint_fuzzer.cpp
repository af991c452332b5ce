// libFuzzer target for volt's checkpoint loader: the bytes of a checkpoint file go through the same checks
// fit(ckpt_path=...) and volt::load_checkpoint_weights use (the file-format checks of
// detail::load_archive_bytes, LibTorch's zip and pickle readers, the volt entries, the key and shape comparison
// with a model, Module::load).
//
// The property: every input either loads or raises a C++ exception (CheckpointError for everything volt
// checks); no crash, hang or AddressSanitizer report. Seeds are real checkpoints (fuzz/corpus/checkpoint).
//
// Build and run: fuzz/run_checkpoint_fuzzer.sh (clang with -fsanitize=fuzzer,address).
#include <torch/torch.h>

#include <volt/serialization/checkpoint_io.hpp>

#include <cstddef>
#include <cstdint>
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

void exercise(const std::string& bytes) {
  torch::serialize::InputArchive archive;
  volt::detail::load_archive_bytes(archive, bytes, "<fuzz input>", torch::kCPU);
  volt::detail::CheckpointReader(archive, "<fuzz input>").read_int("volt/format");
  for (const char* key : {"loop/epoch", "loop/global_step", "loop/batches_done"}) {
    c10::IValue value;
    if (archive.try_read(key, value) && value.isInt()) (void)value.toInt();
  }
  c10::IValue list;
  if (archive.try_read("schedulers/steps", list) && list.isIntList()) (void)list.toIntList().size();
  torch::Tensor rng;
  if (archive.try_read("rng/cpu", rng, /*is_buffer=*/true)) (void)rng.numel();
  torch::serialize::InputArchive model_archive;
  if (!archive.try_read("model", model_archive)) return;
  Net net;
  volt::detail::check_model_matches(model_archive, net, "<fuzz input>");
  net.load(model_archive);
  (void)net.fc1->weight.sum().item<float>();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    exercise(bytes);
  } catch (const std::exception&) {
    // Rejected with an exception: the expected outcome for a bad file.
  }
  return 0;
}

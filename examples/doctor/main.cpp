// Checks what this machine and this LibTorch can run, and says what to do about each problem: LibTorch's
// version and build (CUDA, MPS), the CUDA devices with their names and memory, why MPS is or is not
// available, what volt::Auto would pick, and which Trainer the command-line flags would build.
//
//   ./doctor                                       # the machine
//   ./doctor --accelerator cuda --devices 2 --precision bf16-mixed   # ... and what these flags would run
#include <volt/volt.hpp>

#ifdef VOLT_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif
#include <ATen/Parallel.h>
#include <ATen/detail/CUDAHooksInterface.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

/// The CUDA runtime version LibTorch was built with ("13.0"), or empty for a LibTorch without CUDA.
std::string libtorch_cuda_version() {
  try {
    const long version = at::detail::getCUDAHooks().versionCUDART();
    return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
  } catch (const std::exception&) {
    return {};  // the stub hooks of a CPU-only LibTorch throw
  }
}

const char* yes_no(bool value) { return value ? "yes" : "no"; }

template <class P>
std::string policy_name() {
  if constexpr (std::is_same_v<P, volt::CPU>) return "volt::CPU";
  else if constexpr (std::is_same_v<P, volt::CUDA>) return "volt::CUDA";
  else if constexpr (std::is_same_v<P, volt::MPS>) return "volt::MPS";
  else if constexpr (std::is_same_v<P, volt::SingleDevice>) return "volt::SingleDevice";
  else if constexpr (std::is_same_v<P, volt::DDP>) return "volt::DDP";
  else if constexpr (std::is_same_v<P, volt::FP32>) return "volt::FP32";
  else if constexpr (std::is_same_v<P, volt::FP64>) return "volt::FP64";
  else if constexpr (std::is_same_v<P, volt::FP16True>) return "volt::FP16True";
  else if constexpr (std::is_same_v<P, volt::BF16True>) return "volt::BF16True";
  else if constexpr (std::is_same_v<P, volt::FP16Autocast>) return "volt::FP16Autocast";
  else return "volt::BF16Autocast";
}

}  // namespace

int main(int argc, char** argv) {
  volt::cli::Parser parser("doctor", "Reports what volt can run here and what to do about each problem.");
  std::vector<std::string> advice;
  volt::cli::Args args;
  try {
    args = parser.parse(argc, argv);
  } catch (const volt::cli::UsageError& error) {
    std::fprintf(stderr, "doctor: error: %s\n", error.what());
    return volt::cli::usage_error_status;
  }
  if (args.help) {
    std::printf("%s", parser.help().c_str());
    return 0;
  }

  std::printf("volt %s, LibTorch %s\n", volt::version, TORCH_VERSION);
  std::printf("intra-op threads: %d\n", at::get_num_threads());

  // ---- CUDA ----
  const std::string cuda_build = libtorch_cuda_version();
  const int cuda_devices = volt::machine::cuda_device_count();
  std::printf("\nCUDA\n  LibTorch built with CUDA: %s%s\n", yes_no(!cuda_build.empty()),
              cuda_build.empty() ? "" : (" (CUDA runtime " + cuda_build + ")").c_str());
  std::printf("  volt's CUDA code paths (VOLT_WITH_CUDA): %s\n", yes_no(volt::compat::built_with_cuda));
  std::printf("  visible CUDA devices: %d\n", cuda_devices);
#ifdef VOLT_WITH_CUDA
  for (int index = 0; index < cuda_devices; ++index) {
    const auto* properties = at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(index));
    std::printf("    cuda:%d  %s, %.1f GiB, compute capability %d.%d, %d multiprocessors\n", index, properties->name,
                static_cast<double>(properties->totalGlobalMem) / (1024.0 * 1024.0 * 1024.0), properties->major,
                properties->minor, properties->multiProcessorCount);
  }
#endif
  if (cuda_build.empty()) {
    advice.push_back("For NVIDIA GPUs, build against a LibTorch with CUDA, e.g. the pip torch wheel's: "
                     "T=$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))'), then "
                     "-DCMAKE_PREFIX_PATH=\"$T/share/cmake;$T\" (both folders: with only the first, CMake may "
                     "link a system LibTorch's libtorch.so).");
  } else if (cuda_devices == 0) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    advice.push_back(std::string("LibTorch has CUDA but sees no device: check `nvidia-smi` and the driver") +
                     (visible != nullptr ? std::string(", and CUDA_VISIBLE_DEVICES (set to \"") + visible + "\")" : "") +
                     ".");
  } else if (!volt::compat::built_with_cuda) {
    advice.push_back("LibTorch has CUDA but volt's CUDA code paths are off: link volt::volt with CMake (it defines "
                     "VOLT_WITH_CUDA) or define VOLT_WITH_CUDA yourself; device statistics need it.");
  }

  // ---- MPS ----
  std::printf("\nMPS\n  LibTorch reports MPS: %s\n  processor: %s\n", yes_no(volt::machine::torch_mps_available()),
              volt::machine::processor().c_str());
  const char* disable_mps = std::getenv("DISABLE_MPS");
  std::printf("  DISABLE_MPS: %s\n", disable_mps != nullptr ? disable_mps : "(not set)");
  if (volt::MPS::is_available()) {
    std::printf("  MPS available: yes\n");
    const char* fallback = std::getenv("PYTORCH_ENABLE_MPS_FALLBACK");
    if (fallback == nullptr || std::string(fallback) != "1") {
      advice.push_back("Operators MPS lacks stop with an error; set PYTORCH_ENABLE_MPS_FALLBACK=1 before starting "
                       "to run them on the CPU.");
    }
  } else {
    const std::string reason = volt::cli::mps_unavailable_reason();
    std::printf("  MPS available: no: %s\n", reason.c_str());
#ifdef __APPLE__
    advice.push_back("MPS: " + reason + ".");
#endif
  }

  // ---- choice ----
  const auto picked = volt::Auto::resolve();
  std::printf("\nvolt::Auto picks: %s\n", std::string(volt::to_string(picked)).c_str());
  if (picked == volt::AcceleratorKind::cpu) {
    advice.push_back("Training runs on the CPU. That is fine for the examples; for speed use a machine with an "
                     "NVIDIA GPU or an Apple-silicon Mac (see above for what is missing).");
  }

  // ---- the flags: which Trainer they would build here (none is built) ----
  int status = 0;
  try {
    volt::cli::dispatch(args, [&]<class A, class S, class P>(volt::cli::Args& resolved) {
      std::string ids;
      for (int id : resolved.device_ids) ids += (ids.empty() ? "" : ", ") + std::to_string(id);
      std::printf("with these flags: volt::Trainer<%s, %s, %s> on %s devices [%s]\n", policy_name<A>().c_str(),
                  policy_name<S>().c_str(), policy_name<P>().c_str(), std::string(A::name).c_str(), ids.c_str());
    });
  } catch (const volt::cli::UsageError& error) {
    std::printf("with these flags: nothing can run: %s\n", error.what());
    advice.push_back("Fix the flags (see the line above) or choose what is available here.");
    status = volt::cli::usage_error_status;
  }
  std::printf("\n");
  if (advice.empty()) {
    std::printf("No problems found.\n");
  } else {
    std::printf("What to do:\n");
    for (const auto& line : advice) std::printf("  - %s\n", line.c_str());
  }
  return status;
}

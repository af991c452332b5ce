// CPU against the accelerator on square matrix products of several sizes. Each timing synchronises the
// device before the clock stops (GPU kernels run asynchronously), after warm-up runs; the speedup is the
// CPU time over the accelerator time. --precision picks the dtype (64-true: float64, 16-true: float16,
// bf16-true: bfloat16) or autocast (16-mixed, bf16-mixed) through volt's precision policies.
//
//   ./matmul_benchmark                                   # auto: MPS, then CUDA, then CPU
//   ./matmul_benchmark --accelerator cuda --precision bf16-true --sizes 1024,4096,8192
#include <volt/volt.hpp>

#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

namespace {

/// Waits for every kernel queued on `device`: CUDA through its stream API, other devices by reading a value
/// of `result` back (a read waits for the kernel that writes it).
void synchronize(torch::Device device, const torch::Tensor& result) {
  if (device.is_cuda()) {
    torch::cuda::synchronize(device.index());
  } else if (!device.is_cpu()) {
    (void)result.flatten()[0].item<double>();
  }
}

/// Mean seconds per product of two n x n matrices on `device` under the precision policy.
template <class Precision>
double time_matmul(std::int64_t n, torch::Device device, int repeats) {
  Precision precision;
  precision.setup(device);
  auto a = precision.convert_input(torch::randn({n, n}, torch::TensorOptions().device(device)));
  auto b = precision.convert_input(torch::randn({n, n}, torch::TensorOptions().device(device)));
  torch::NoGradGuard no_grad;
  auto context = precision.forward_context();
  torch::Tensor c;
  for (int i = 0; i < 2; ++i) c = torch::mm(a, b);  // warm-up: kernels chosen, memory allocated
  synchronize(device, c);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < repeats; ++i) c = torch::mm(a, b);
  synchronize(device, c);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / repeats;
}

std::vector<std::int64_t> parse_sizes(const std::string& text) {
  std::vector<std::int64_t> sizes;
  std::stringstream in(text);
  for (std::string piece; std::getline(in, piece, ',');) {
    std::size_t used = 0;
    long long value = 0;
    try {
      value = std::stoll(piece, &used);
    } catch (const std::logic_error&) {
      used = 0;
    }
    if (used != piece.size() || value < 1) {
      throw volt::cli::UsageError("argument --sizes: expected positive integers separated by commas, got '" + text + "'");
    }
    sizes.push_back(value);
  }
  return sizes;
}

}  // namespace

int main(int argc, char** argv) {
  volt::cli::Parser parser("matmul_benchmark", "Times square matrix products on the CPU and on the accelerator.");
  parser.add_option("--sizes", "N,N,...", "matrix sizes", "256,512,1024,2048")
      .add_option("--repeats", "N", "timed products per size", "10");
  return volt::cli::run(parser, argc, argv, [&]<class A, class S, class P>(volt::cli::Args& args) {
    const auto sizes = parse_sizes(args.get("--sizes"));
    const auto repeats = static_cast<int>(args.get_int("--repeats"));
    const torch::Device device = A::get_parallel_devices(args.device_ids).front();
    A::setup_device(device);
    std::printf("precision %s, %d timed products per size, accelerator %s\n", std::string(P::name).c_str(),
                repeats, device.str().c_str());
    if (device.is_cpu()) std::printf("(no accelerator here: the CPU is compared with itself)\n");
    std::printf("%8s %14s %14s %10s %14s\n", "n", "cpu ms", "accel ms", "speedup", "accel GFLOP/s");
    for (const auto n : sizes) {
      // fp16 products on the CPU are slow or missing in older LibTorch: the CPU baseline runs in fp32.
      const double cpu = std::is_same_v<P, volt::FP64> ? time_matmul<volt::FP64>(n, torch::kCPU, repeats)
                                                       : time_matmul<volt::FP32>(n, torch::kCPU, repeats);
      const double accelerated = time_matmul<P>(n, device, repeats);
      const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
      std::printf("%8lld %14.3f %14.3f %9.1fx %14.1f\n", static_cast<long long>(n), cpu * 1e3, accelerated * 1e3,
                  cpu / accelerated, flops / accelerated / 1e9);
    }
    return 0;
  });
}

#include "test_common.hpp"

#include "accelerators/scoped_env.hpp"

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using volt::testing::ScopedMachine;
using volt_test::ScopedEnv;

std::vector<torch::Device> cuda_devices(std::initializer_list<int> ids) {
  std::vector<torch::Device> devices;
  for (int id : ids) devices.emplace_back(torch::kCUDA, static_cast<c10::DeviceIndex>(id));
  return devices;
}

}  // namespace

static_assert(volt::AcceleratorPolicy<volt::CPU>);
static_assert(volt::AcceleratorPolicy<volt::CUDA>);
static_assert(volt::AcceleratorPolicy<volt::MPS>);
static_assert(volt::AcceleratorSelector<volt::Auto> && volt::AcceleratorSelector<volt::GPU>);
static_assert(!volt::AcceleratorPolicy<volt::Auto> && !volt::AcceleratorChoice<int>);
static_assert(volt::CPU::name == "cpu" && volt::CUDA::name == "cuda" && volt::MPS::name == "mps");
static_assert(volt::Auto::name == "auto" && volt::GPU::name == "gpu");
static_assert(volt::to_string(volt::AcceleratorKind::mps) == "mps");

TEST_CASE("ScopedMachine fakes the probes, nests, and restores the real machine") {
  const int real_cuda = volt::machine::cuda_device_count();
  const bool real_mps = volt::machine::torch_mps_available();
  const std::string real_processor = volt::machine::processor();
  CHECK(real_cuda == volt::compat::torch_cuda_device_count());
  {
    ScopedMachine outer{{.cuda_device_count = 4, .torch_mps_available = true, .processor = "arm64"}};
    CHECK(volt::machine::cuda_device_count() == 4);
    CHECK(volt::machine::torch_mps_available());
    CHECK(volt::machine::processor() == "arm64");
    {
      ScopedMachine inner{{.cuda_device_count = 16}};
      CHECK(volt::machine::cuda_device_count() == 16);
      CHECK_FALSE(volt::machine::torch_mps_available());  // fields left out: no MPS
      CHECK(volt::machine::processor() == "arm64");
      CHECK(volt::CUDA::auto_device_count() == 16);
    }
    CHECK(volt::machine::cuda_device_count() == 4);
    CHECK(volt::machine::torch_mps_available());
  }
  CHECK(volt::machine::cuda_device_count() == real_cuda);
  CHECK(volt::machine::torch_mps_available() == real_mps);
  CHECK(volt::machine::processor() == real_processor);
}

TEST_CASE("the real processor probe names this build's architecture") {
#if defined(__x86_64__) && !defined(__APPLE__)
  CHECK(volt::machine::processor() == "x86_64");
#elif defined(__aarch64__) && !defined(__APPLE__)
  CHECK(volt::machine::processor() == "arm64");
#else
  CHECK_FALSE(volt::machine::processor().empty());
#endif
}

TEST_CASE("CUDA availability and device count follow the machine") {
  for (int count : {0, 1, 2, 16}) {
    ScopedMachine machine{{.cuda_device_count = count}};
    CAPTURE(count);
    CHECK(volt::CUDA::is_available() == (count > 0));
    CHECK(volt::CUDA::auto_device_count() == count);
    CHECK(volt::CUDA::available_ids().size() == static_cast<std::size_t>(count));
  }
}

TEST_CASE("MPS availability: DISABLE_MPS, LibTorch's report, the processor, and the cache") {
  ScopedEnv no_disable("DISABLE_MPS", nullptr);
  SUBCASE("each condition") {
    {
      ScopedMachine machine{{.torch_mps_available = true, .processor = "arm64"}};
      CHECK(volt::MPS::is_available());
      CHECK(volt::MPS::available_ids() == std::vector<int>{0});
    }
    {
      ScopedMachine machine{{.torch_mps_available = true, .processor = "arm"}};
      CHECK(volt::MPS::is_available());
    }
    for (const char* processor : {"x86_64", "i386", "", "aarch64", "ARM64"}) {
      ScopedMachine machine{{.torch_mps_available = true, .processor = processor}};
      CAPTURE(processor);
      CHECK_FALSE(volt::MPS::is_available());
      CHECK(volt::MPS::available_ids().empty());
    }
    {
      ScopedMachine machine{{.torch_mps_available = false, .processor = "arm64"}};
      CHECK_FALSE(volt::MPS::is_available());
    }
    {
      ScopedEnv disable("DISABLE_MPS", "1");
      ScopedMachine machine{{.torch_mps_available = true, .processor = "arm64"}};
      CHECK_FALSE(volt::MPS::is_available());
    }
    for (const char* value : {"true", "0", "", " 1", "01"}) {
      ScopedEnv disable("DISABLE_MPS", value);  // only exactly "1" disables
      ScopedMachine machine{{.torch_mps_available = true, .processor = "arm64"}};
      CAPTURE(value);
      CHECK(volt::MPS::is_available());
    }
  }
  SUBCASE("the answer is cached until cleared or the machine changes") {
    ScopedMachine machine{{.torch_mps_available = true, .processor = "arm"}};
    CHECK(volt::MPS::is_available());
    {
      ScopedEnv disable("DISABLE_MPS", "1");
      CHECK(volt::MPS::is_available());  // cached, as Lightning's lru_cache
      volt::MPS::clear_availability_cache();
      CHECK_FALSE(volt::MPS::is_available());
    }
    CHECK_FALSE(volt::MPS::is_available());  // still cached after DISABLE_MPS is gone
    {
      ScopedMachine nested{{.torch_mps_available = true, .processor = "arm64"}};
      CHECK(volt::MPS::is_available());  // a new machine recomputes
      ScopedEnv disable("DISABLE_MPS", "1");
      CHECK(volt::MPS::is_available());
    }
    // Leaving the nested machine recomputes again; DISABLE_MPS is unset by now.
    CHECK(volt::MPS::is_available());
  }
  SUBCASE("the cached value is per process, not per call site") {
    ScopedMachine machine{{.torch_mps_available = true, .processor = "arm64"}};
    const bool first = volt::MPS::is_available();
    ScopedEnv disable("DISABLE_MPS", "1");
    CHECK(volt::Auto::resolve() == volt::AcceleratorKind::mps);
    CHECK(volt::MPS::is_available() == first);
  }
}

TEST_CASE("MPS always has one device") {
  ScopedMachine machine{{.torch_mps_available = true}};
  CHECK(volt::MPS::auto_device_count() == 1);
  static_assert(volt::MPS::max_devices == 1);
}

TEST_CASE("get_parallel_devices") {
  SUBCASE("CPU: one cpu device per process") {
    CHECK(volt::CPU::get_parallel_devices({0}) == std::vector<torch::Device>{torch::Device("cpu")});
    CHECK(volt::CPU::get_parallel_devices({0, 1, 2}) == std::vector<torch::Device>(3, torch::Device("cpu")));
    CHECK(volt::CPU::get_parallel_devices(*volt::CPU::parse_devices("3")).size() == 3);
  }
  SUBCASE("CUDA: the ids themselves, unchecked, in order (spec 1.4)") {
    CHECK(volt::CUDA::get_parallel_devices({}).empty());
    CHECK(volt::CUDA::get_parallel_devices({1}) == cuda_devices({1}));
    CHECK(volt::CUDA::get_parallel_devices({3, 1}) == cuda_devices({3, 1}));
    CHECK(volt::CUDA::get_parallel_devices({0, 0}) == cuda_devices({0, 0}));
  }
  SUBCASE("MPS: numbered by position (spec 1.3, M1/M2)") {
    ScopedMachine machine{{.torch_mps_available = true}};
    const std::vector<torch::Device> mps0{torch::Device(torch::kMPS, 0)};
    for (const volt::DeviceSpec& spec :
         {volt::DeviceSpec{1}, volt::devices({0}), volt::DeviceSpec{"1"}, volt::DeviceSpec{"0,"}, volt::DeviceSpec{"-1"},
          volt::DeviceSpec{-1}}) {
      CAPTURE(spec.python_repr());
      CHECK(volt::MPS::get_parallel_devices(*volt::MPS::parse_devices(spec)) == mps0);
    }
    CHECK_THROWS_WITH_AS(volt::MPS::parse_devices(2), "You requested gpu: [0, 1]\n But your machine only has: [0]",
                         volt::MisconfigurationError);
    CHECK_THROWS_WITH_AS(volt::MPS::parse_devices("2"), "You requested gpu: [0, 1]\n But your machine only has: [0]",
                         volt::MisconfigurationError);
    CHECK_FALSE(volt::MPS::parse_devices(0).has_value());  // M5: "no devices"
    const std::vector<torch::Device> by_position{torch::Device(torch::kMPS, 0), torch::Device(torch::kMPS, 1)};
    CHECK(volt::MPS::get_parallel_devices({5, 9}) == by_position);
  }
}

TEST_CASE("setup_device: Lightning's messages and exception types") {
  const torch::Device cpu("cpu");
  const torch::Device cuda0("cuda:0");
  const torch::Device mps(torch::kMPS);
  CHECK_NOTHROW(volt::CPU::setup_device(cpu));
  CHECK_THROWS_WITH_AS(volt::CPU::setup_device(cuda0), "Device should be CPU, got cuda:0 instead.",
                       volt::MisconfigurationError);
  CHECK_THROWS_WITH_AS(volt::CPU::setup_device(mps), "Device should be CPU, got mps instead.",
                       volt::MisconfigurationError);
  CHECK_THROWS_WITH_AS(volt::CPU::setup_device(cuda0, volt::Frontend::fabric), "Device should be CPU, got cuda:0 instead.",
                       std::invalid_argument);
  // PL's CUDA text says "GPU" and has no final period; Fabric's says "CUDA" with one.
  CHECK_THROWS_WITH_AS(volt::CUDA::setup_device(cpu), "Device should be GPU, got cpu instead",
                       volt::MisconfigurationError);
  CHECK_THROWS_WITH_AS(volt::CUDA::setup_device(cpu, volt::Frontend::fabric), "Device should be CUDA, got cpu instead.",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(volt::CUDA::setup_device(torch::Device(torch::kMPS, 0)), "Device should be GPU, got mps:0 instead",
                       volt::MisconfigurationError);
  CHECK_NOTHROW(volt::MPS::setup_device(mps));
  CHECK_NOTHROW(volt::MPS::setup_device(torch::Device(torch::kMPS, 0)));
  CHECK_THROWS_WITH_AS(volt::MPS::setup_device(cpu), "Device should be MPS, got cpu instead.", volt::MisconfigurationError);
  CHECK_THROWS_WITH_AS(volt::MPS::setup_device(cuda0), "Device should be MPS, got cuda:0 instead.",
                       volt::MisconfigurationError);
  CHECK_THROWS_WITH_AS(volt::MPS::setup_device(cpu, volt::Frontend::fabric), "Device should be MPS, got cpu instead.",
                       std::invalid_argument);
  // A MisconfigurationError is not a std::invalid_argument: the two front ends are told apart.
  CHECK_THROWS_AS(volt::CPU::setup_device(cuda0), std::runtime_error);
}

TEST_CASE("CPU and MPS device stats are host-wide percentages") {
  const auto cpu = volt::CPU::get_device_stats(torch::Device("cpu"));
  CHECK(cpu.size() == 3);
  for (const char* key : {"cpu_vm_percent", "cpu_percent", "cpu_swap_percent"}) {
    CAPTURE(key);
    REQUIRE(cpu.count(key) == 1);
    CHECK(cpu.at(key) >= 0.0);
    CHECK(cpu.at(key) <= 100.0);
  }
  CHECK(cpu.at("cpu_vm_percent") > 0.0);  // a running process uses memory

  // cpu_percent measures since the previous call: spin, then read.
  volt::detail::host_cpu_percent();
  volatile double sink = 0;
  for (int i = 0; i < 20000000; ++i) sink = sink + i * 0.5;
  const double busy = volt::detail::host_cpu_percent();
  CHECK(busy > 0.0);
  CHECK(busy <= 100.0);

  const auto mps = volt::MPS::get_device_stats(torch::Device(torch::kMPS));
  for (const char* key : {"M1_vm_percent", "M1_percent", "M1_swap_percent"}) {
    CAPTURE(key);
    REQUIRE(mps.count(key) == 1);
    CHECK(mps.at(key) >= 0.0);
    CHECK(mps.at(key) <= 100.0);
  }
  if (!volt::compat::torch_mps_available()) {
    CHECK(mps.size() == 3);  // no allocator figures without MPS
    CHECK(volt::MPS::allocated_bytes() == -1);
    CHECK_NOTHROW(volt::MPS::empty_cache());
  }
}

TEST_CASE("psutil's rounding of usage percentages") {
  CHECK(volt::detail::usage_percent(1, 3) == doctest::Approx(33.3));
  CHECK(volt::detail::usage_percent(2, 3) == doctest::Approx(66.7));
  CHECK(volt::detail::usage_percent(5, 0) == 0.0);
}

TEST_CASE("CUDA device stats and memory helpers on a real GPU") {
  if (!torch::cuda::is_available()) {
    // Without a GPU there is nothing to measure; the helpers must still be callable.
    CHECK(volt::CUDA::is_available() == (volt::compat::torch_cuda_device_count() > 0));
    if (!volt::compat::built_with_cuda) {
      CHECK(volt::CUDA::get_device_stats(torch::Device("cuda:0")).empty());
      CHECK(volt::CUDA::allocated_bytes(torch::Device("cuda:0")) == 0);
    }
    return;
  }
  const torch::Device device("cuda:0");
  CHECK(volt::CUDA::is_available());
  CHECK_NOTHROW(volt::CUDA::setup_device(device));
  // Before the process's first CUDA allocation LibTorch's allocator has no statistics: Lightning's {}.
  CHECK_NOTHROW(volt::CUDA::get_device_stats(device));
  const auto before = volt::CUDA::allocated_bytes(device);
  auto tensor = torch::ones({1024, 1024}, torch::TensorOptions().device(device));
  const auto stats = volt::CUDA::get_device_stats(device);
  REQUIRE(stats.count("allocated_bytes.all.current") == 1);
  CHECK(stats.at("allocated_bytes.all.current") >= 4.0 * 1024 * 1024);
  CHECK(stats.at("reserved_bytes.all.peak") >= stats.at("allocated_bytes.all.current"));
  CHECK(stats.count("active_bytes.large_pool.peak") == 1);
  CHECK(volt::CUDA::allocated_bytes(device) >= before + 4 * 1024 * 1024);
  MESSAGE("allocated_bytes.all.current = " << stats.at("allocated_bytes.all.current")
                                            << ", reserved_bytes.all.current = " << stats.at("reserved_bytes.all.current"));
  tensor = torch::Tensor();
  volt::CUDA::empty_cache();
  CHECK(volt::CUDA::get_device_stats(device).at("reserved_bytes.all.current") <
        stats.at("reserved_bytes.all.current") + 1);
}

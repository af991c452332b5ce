#include "test_common.hpp"

#include <cstdlib>

TEST_CASE("MisconfigurationError is a std::runtime_error carrying the message") {
  try {
    throw volt::MisconfigurationError("bad devices");
  } catch (const std::runtime_error& error) {
    CHECK(std::string(error.what()) == "bad devices");
  }
}

TEST_CASE("the log sink receives messages and warn_once prints a warning once") {
  volt_test::CaptureLog log;
  volt::log::info("hello");
  volt::log::warn_once("careful");
  volt::log::warn_once("careful");
  CHECK(log.infos == std::vector<std::string>{"hello"});
  CHECK(log.warnings == std::vector<std::string>{"careful"});
}

TEST_CASE("rank-zero messages are silent on other ranks") {
  volt_test::CaptureLog log;
  ::setenv("RANK", "1", 1);
  volt::log::info_rank_zero("from rank 1");
  ::setenv("RANK", "0", 1);
  volt::log::info_rank_zero("from rank 0");
  ::unsetenv("RANK");
  CHECK(log.infos == std::vector<std::string>{"from rank 0"});
}

TEST_CASE("compat: the LibTorch version number matches the headers") {
  CHECK(volt::compat::torch_version / 10000 == TORCH_VERSION_MAJOR);
  CHECK(volt::compat::torch_version % 10000 / 100 == TORCH_VERSION_MINOR);
}

TEST_CASE("compat: CPU autocast switches round-trip") {
  const auto cpu = c10::DeviceType::CPU;
  REQUIRE(volt::compat::autocast_available(cpu));
  const bool before = volt::compat::autocast_enabled(cpu);
  const auto dtype_before = volt::compat::autocast_dtype(cpu);
  volt::compat::set_autocast_dtype(cpu, torch::kBFloat16);
  volt::compat::set_autocast_enabled(cpu, true);
  CHECK(volt::compat::autocast_enabled(cpu));
  CHECK((volt::compat::autocast_dtype(cpu) == torch::kBFloat16));
  {
    auto out = torch::mm(torch::ones({2, 2}), torch::ones({2, 2}));
    CHECK((out.scalar_type() == torch::kBFloat16));
  }
  volt::compat::set_autocast_enabled(cpu, before);
  volt::compat::set_autocast_dtype(cpu, dtype_before);
  CHECK(volt::compat::autocast_enabled(cpu) == before);
  CHECK((torch::mm(torch::ones({2, 2}), torch::ones({2, 2})).scalar_type() == torch::kFloat));
}

TEST_CASE("compat: bf16 autocast is supported on CPU; fp16 on CPU only from LibTorch 2") {
  CHECK(volt::compat::autocast_dtype_supported(c10::DeviceType::CPU, torch::kBFloat16));
  CHECK(volt::compat::autocast_dtype_supported(c10::DeviceType::CPU, torch::kHalf) ==
        (volt::compat::torch_version >= 20000));
}

TEST_CASE("compat: CUDA probes answer without a GPU") {
  if (volt::compat::torch_cuda_device_count() == 0) {
    CHECK(volt::compat::cuda_allocated_bytes(0) == 0);
  } else {
    CHECK(volt::compat::built_with_cuda);
  }
}

// volt::seed_everything against Lightning 2.6.6's seed_everything (values recorded with
// tests/oracle/record_seed.py).
#include <torch/torch.h>

#include <doctest/doctest.h>

#include "accelerators/scoped_env.hpp"
#include "test_common.hpp"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

using volt_test::ScopedEnv;

TEST_CASE("seed_everything seeds LibTorch as Lightning's does and records the seed in the environment") {
  ScopedEnv global("PL_GLOBAL_SEED", nullptr);
  ScopedEnv workers("PL_SEED_WORKERS", nullptr);
  ScopedEnv rank("LOCAL_RANK", nullptr);
  volt_test::CaptureLog log;
  CHECK(volt::seed_everything(42) == 42);
  // Lightning: seed_everything(42); torch.rand(3).tolist()
  const auto values = torch::rand({3});
  CHECK(values[0].item<float>() == 0.8822692632675171f);
  CHECK(values[1].item<float>() == 0.9150039553642273f);
  CHECK(values[2].item<float>() == 0.38286375999450684f);
  CHECK(std::string(std::getenv("PL_GLOBAL_SEED")) == "42");
  CHECK(std::string(std::getenv("PL_SEED_WORKERS")) == "0");
  CHECK(log.infos == std::vector<std::string>{"Seed set to 42"});
  CHECK(volt::seed_everything(4294967295, /*workers=*/true) == 4294967295);
  CHECK(std::string(std::getenv("PL_GLOBAL_SEED")) == "4294967295");
  CHECK(std::string(std::getenv("PL_SEED_WORKERS")) == "1");
}

TEST_CASE("seed_everything without a seed reads PL_GLOBAL_SEED, else uses 0 with Lightning's warning") {
  ScopedEnv workers("PL_SEED_WORKERS", nullptr);
  ScopedEnv rank("LOCAL_RANK", nullptr);
  {
    ScopedEnv global("PL_GLOBAL_SEED", nullptr);
    volt_test::CaptureLog log;
    CHECK(volt::seed_everything() == 0);
    CHECK(log.warnings == std::vector<std::string>{"No seed found, seed set to 0"});
    CHECK(std::string(std::getenv("PL_GLOBAL_SEED")) == "0");
  }
  {
    ScopedEnv global("PL_GLOBAL_SEED", "123");
    CHECK(volt::seed_everything() == 123);
  }
  {
    ScopedEnv global("PL_GLOBAL_SEED", " 7 ");  // Python's int() strips spaces
    CHECK(volt::seed_everything() == 7);
  }
  {
    // A later call without a seed, in this process or one started after, repeats the same draws.
    ScopedEnv global("PL_GLOBAL_SEED", nullptr);
    volt::seed_everything(9, false, /*verbose=*/false);
    const auto first = torch::rand({4});
    volt::seed_everything(std::nullopt, false, false);
    CHECK(torch::equal(first, torch::rand({4})));
  }
}

TEST_CASE("seed_everything refuses what Lightning refuses, with its messages") {
  ScopedEnv workers("PL_SEED_WORKERS", nullptr);
  {
    ScopedEnv global("PL_GLOBAL_SEED", "abc");
    CHECK_THROWS_WITH_AS(volt::seed_everything(), "Invalid seed specified via PL_GLOBAL_SEED: 'abc'",
                         std::invalid_argument);
  }
  {
    ScopedEnv global("PL_GLOBAL_SEED", "1.5");
    CHECK_THROWS_WITH_AS(volt::seed_everything(), "Invalid seed specified via PL_GLOBAL_SEED: '1.5'",
                         std::invalid_argument);
  }
  CHECK_THROWS_WITH_AS(volt::seed_everything(-1), "-1 is not in bounds, numpy accepts from 0 to 4294967295",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(volt::seed_everything(4294967296),
                       "4294967296 is not in bounds, numpy accepts from 0 to 4294967295", std::invalid_argument);
}

TEST_CASE("seed_everything prefixes the rank when a launcher set one") {
  ScopedEnv global("PL_GLOBAL_SEED", nullptr);
  ScopedEnv workers("PL_SEED_WORKERS", nullptr);
  ScopedEnv rank("LOCAL_RANK", "1");
  volt_test::CaptureLog log;
  volt::seed_everything(5);
  CHECK(log.infos == std::vector<std::string>{"[rank: 1] Seed set to 5"});
}

TEST_CASE("python_float prints numbers as Python's repr") {
  // Python 3.11: [repr(x) for x in (...)]
  const std::vector<std::pair<double, const char*>> cases{
      {1.0, "1.0"},       {0.25, "0.25"},           {1.0 / 3, "0.3333333333333333"},
      {1e-5, "1e-05"},    {1e-4, "0.0001"},         {1e16, "1e+16"},
      {1e15, "1000000000000000.0"},                 {123.456, "123.456"},
      {-2.5, "-2.5"},     {1.5e16, "1.5e+16"},      {0.015625, "0.015625"},
      {5e-324, "5e-324"}, {1.7976931348623157e308, "1.7976931348623157e+308"},
      {100.0, "100.0"},   {0.1, "0.1"},             {0.0, "0.0"},
      {-0.0, "-0.0"},
  };
  for (const auto& [value, text] : cases) CHECK(volt::detail::python_float(value) == text);
  CHECK(volt::detail::python_float(std::numeric_limits<double>::infinity()) == "inf");
  CHECK(volt::detail::python_float(std::nan("")) == "nan");
}

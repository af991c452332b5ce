#include "test_common.hpp"

#include "accelerators/scoped_env.hpp"

#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using SingleRuntime = volt::detail::StrategyRuntime<volt::SingleDevice>;
using DdpRuntime = volt::detail::StrategyRuntime<volt::DDP>;

static_assert(volt::StrategyRuntimeInterface<SingleRuntime>);
static_assert(volt::StrategyRuntimeInterface<DdpRuntime>);

struct NotARuntime {
  void barrier() {}
};
static_assert(!volt::StrategyRuntimeInterface<NotARuntime>);

/// Clears what would make the cluster environment anything but one volt-launched process.
struct NoRank {
  volt_test::ScopedEnv rank{"RANK", nullptr};
  volt_test::ScopedEnv local_rank{"LOCAL_RANK", nullptr};
  volt_test::ScopedEnv slurm{"SLURM_PROCID", nullptr};
  volt_test::ScopedEnv jsm{"JSM_NAMESPACE_RANK", nullptr};
  volt_test::ScopedEnv disable_mps{"DISABLE_MPS", nullptr};
  volt_test::ScopedEnv torchelastic{"TORCHELASTIC_RUN_ID", nullptr};
};

template <class Strategy>
volt::DeviceSelection select(volt::DeviceSpec devices, int num_nodes, volt::Frontend frontend) {
  return volt::detail::select_strategy_devices<volt::CPU, Strategy>(devices, num_nodes, frontend);
}

}  // namespace

TEST_CASE("StrategyRuntime<SingleDevice> is a set of identities") {
  SingleRuntime runtime;
  runtime.configure(select<volt::SingleDevice>(1, 1, volt::Frontend::trainer), 1);
  runtime.setup_environment();
  CHECK(runtime.root_device() == torch::Device(torch::kCPU));
  CHECK(runtime.global_rank() == 0);
  CHECK(runtime.local_rank() == 0);
  CHECK(runtime.node_rank() == 0);
  CHECK(runtime.world_size() == 1);
  CHECK(runtime.is_global_zero());
  std::vector<int> batches{1, 2, 3};
  static_assert(std::is_same_v<decltype(runtime.distribute_data(batches)), std::vector<int>&>);
  CHECK(&runtime.distribute_data(batches) == &batches);
  auto tensor = torch::tensor({1.0, 2.0});
  runtime.all_reduce(tensor, volt::ReduceOp::sum);
  runtime.broadcast(tensor, 0);
  CHECK(torch::equal(tensor, torch::tensor({1.0, 2.0})));
  const auto gathered = runtime.all_gather(tensor);
  REQUIRE(gathered.size() == 1);
  CHECK(gathered[0].is_same(tensor));
  CHECK(runtime.reduce_boolean_decision(true, false));
  CHECK_FALSE(runtime.reduce_boolean_decision(false, true));
  CHECK(runtime.cuda_graph_obstacle() == std::nullopt);
}

TEST_CASE("run_and_agree with one process runs the work and lets its exception through") {
  SingleRuntime runtime;
  int runs = 0;
  int peer_errors = 0;
  auto peer_error = [&] {
    ++peer_errors;
    return std::runtime_error("a peer failed");
  };
  runtime.run_and_agree([&] { ++runs; }, peer_error);
  CHECK(runs == 1);
  CHECK_THROWS_WITH_AS(runtime.run_and_agree([] { throw std::invalid_argument("mine"); }, peer_error), "mine",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(runtime.run_and_agree([] { throw std::logic_error("mine too"); },
                                             [&](const std::string& text) {
                                               ++peer_errors;
                                               return std::runtime_error(text);
                                             }),
                       "mine too", std::logic_error);
  CHECK(peer_errors == 0);

  // DDP's run time with one process (not joined to any group) needs no collective either.
  DdpRuntime ddp;
  CHECK(ddp.world_size() == 1);
  CHECK_THROWS_WITH_AS(ddp.run_and_agree([] { throw std::invalid_argument("alone"); }, peer_error), "alone",
                       std::invalid_argument);
  CHECK(peer_errors == 0);
}

TEST_CASE("StrategyRuntime<DDP>: the data it distributes and its CUDA-graph obstacle") {
  DdpRuntime runtime;  // not configured: one process of rank 0
  CHECK(runtime.cuda_graph_obstacle() ==
        std::optional<std::string>("the strategy is ddp (a captured step cannot contain the gradient all-reduce)"));
  volt::detail::NoData none;
  CHECK(&runtime.distribute_data(none) == &none);
  std::vector<int> batches{1, 2, 3, 4, 5};
  auto split = volt::per_rank(batches);
  CHECK(&runtime.distribute_data(split) == &split);
  auto shard = runtime.distribute_data(batches);
  static_assert(std::is_same_v<decltype(shard), volt::detail::RankShard<std::vector<int>>>);
  CHECK(shard.size() == 5);
  std::vector<int> seen;
  for (int batch : shard) seen.push_back(batch);
  CHECK(seen == batches);
}

TEST_CASE("select_strategy_devices: one device for SingleDevice, each host's message and exception") {
  NoRank environment;
  CHECK(select<volt::SingleDevice>(volt::DeviceSpec{}, 1, volt::Frontend::trainer).num_devices() == 1);
  CHECK(select<volt::SingleDevice>(volt::DeviceSpec{}, 1, volt::Frontend::fabric).num_devices() == 1);
  CHECK(select<volt::DDP>(2, 1, volt::Frontend::fabric).num_devices() == 2);
  CHECK(select<volt::DDP>(2, 2, volt::Frontend::trainer).num_devices() == 2);
  // The Trainer does not check num_nodes for SingleDevice; Fabric does.
  CHECK(select<volt::SingleDevice>(1, 2, volt::Frontend::trainer).num_devices() == 1);
  CHECK_THROWS_WITH_AS(select<volt::SingleDevice>(1, 2, volt::Frontend::fabric),
                       "volt::SingleDevice runs on exactly one device of one node, but the options selected 1 cpu "
                       "device(s) [0] on num_nodes=2. Pass {.devices = 1} (or a single id such as volt::devices({1})) "
                       "and num_nodes = 1.",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(select<volt::SingleDevice>(2, 1, volt::Frontend::trainer),
                       "volt::SingleDevice trains on exactly one device, but the device spec selected 2 cpu devices: "
                       "[0, 1]. Pass {.devices = 1} (or a single id such as volt::devices({1})), or train with "
                       "volt::DDP.",
                       volt::MisconfigurationError);
}

TEST_CASE("select_strategy_devices: Fabric checks the machine before selecting, the Trainer after") {
  NoRank environment;
  volt::testing::ScopedMachine machine{
      volt::machine::FakeMachine{.cuda_device_count = 0, .torch_mps_available = true, .processor = "arm"}};
  auto auto_ddp = [](volt::DeviceSpec devices, volt::Frontend frontend) {
    return volt::detail::select_strategy_devices<volt::Auto, volt::DDP>(devices, 1, frontend);
  };
  VOLT_CHECK_THROWS_CONTAINS(auto_ddp(0, volt::Frontend::fabric), std::invalid_argument,
                             "You set `strategy=ddp` but strategies from the DDP family are not supported");
  VOLT_CHECK_THROWS_CONTAINS(auto_ddp(0, volt::Frontend::trainer), volt::MisconfigurationError,
                             "value is not a valid input using");
  VOLT_CHECK_THROWS_CONTAINS(auto_ddp(1, volt::Frontend::trainer), std::invalid_argument,
                             "You set `strategy=ddp` but strategies from the DDP family are not supported");
}

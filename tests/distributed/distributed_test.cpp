// Cluster environments, samplers, batch sharding, and the process group and gradient reducer with two ranks
// running as two threads of this process (the multi-process runs are in tests/distributed/extra.cmake).
#include "test_common.hpp"

#include "distributed/kernel_counter.hpp"
#include "distributed/two_ranks.hpp"

#include "accelerators/scoped_env.hpp"

#include <algorithm>
#include <thread>

using volt_test::ScopedEnv;

namespace {

struct CleanDistributedEnv {
  ScopedEnv vars[14] = {{"TORCHELASTIC_RUN_ID", nullptr}, {"RANK", nullptr},         {"WORLD_SIZE", nullptr},
                        {"LOCAL_RANK", nullptr},          {"GROUP_RANK", nullptr},   {"NODE_RANK", nullptr},
                        {"MASTER_ADDR", nullptr},         {"MASTER_PORT", nullptr},  {"SLURM_NTASKS", nullptr},
                        {"SLURM_JOB_NAME", nullptr},      {"SLURM_PROCID", nullptr}, {"SLURM_NTASKS_PER_NODE", nullptr},
                        {"STANDALONE_PORT", nullptr},     {"SLURM_NODELIST", nullptr}};
};

}  // namespace

TEST_CASE("volt's own environment: local rank 0 launches, ranks from LOCAL_RANK and NODE_RANK") {
  CleanDistributedEnv clean;
  auto env = volt::detect_cluster_environment(2, 1);
  CHECK(env.kind == volt::ClusterKind::volt);
  CHECK_FALSE(env.creates_processes_externally);
  CHECK(env.global_rank == 0);
  CHECK(env.world_size == 2);
  CHECK(env.main_address == "127.0.0.1");
  CHECK(env.main_port == 0);

  ScopedEnv local("LOCAL_RANK", "1"), node("NODE_RANK", "1"), port("MASTER_PORT", "1234");
  env = volt::detect_cluster_environment(2, 2);
  CHECK(env.creates_processes_externally);
  CHECK(env.local_rank == 1);
  CHECK(env.node_rank == 1);
  CHECK(env.global_rank == 3);
  CHECK(env.world_size == 4);
  CHECK(env.main_port == 1234);
  ScopedEnv bad("LOCAL_RANK", "2");
  VOLT_CHECK_THROWS_CONTAINS(volt::detect_cluster_environment(2, 2), volt::MisconfigurationError,
                             "LOCAL_RANK=2 is outside the 2 devices of this node");
  ScopedEnv not_int("LOCAL_RANK", "one");
  VOLT_CHECK_THROWS_CONTAINS(volt::detect_cluster_environment(2, 2), volt::MisconfigurationError,
                             "LOCAL_RANK='one' is not an integer");
}

TEST_CASE("torchrun: ranks from RANK/WORLD_SIZE/LOCAL_RANK/GROUP_RANK, Lightning's defaults and world-size check") {
  CleanDistributedEnv clean;
  ScopedEnv run("TORCHELASTIC_RUN_ID", "none"), rank("RANK", "1"), world("WORLD_SIZE", "2"), local("LOCAL_RANK", "1");
  volt_test::CaptureLog log;
  auto env = volt::detect_cluster_environment(2, 1);
  CHECK(env.kind == volt::ClusterKind::torchrun);
  CHECK(env.creates_processes_externally);
  CHECK(env.global_rank == 1);
  CHECK(env.node_rank == 0);
  CHECK(env.main_address == "127.0.0.1");
  CHECK(env.main_port == 12910);
  CHECK_THROWS_WITH_AS(volt::detect_cluster_environment(3, 1),
                       "You set `devices=3` and `num_nodes=1` in Lightning, but the product (3 * 1) does not match "
                       "the world size (2).",
                       std::invalid_argument);
  ScopedEnv unset_rank("RANK", nullptr);
  VOLT_CHECK_THROWS_CONTAINS(volt::detect_cluster_environment(2, 1), volt::MisconfigurationError,
                             "torchrun is detected but the environment variable RANK is not set");
}

TEST_CASE("SLURM: ranks from SLURM_* variables, root node from the node list, port from the job id") {
  CleanDistributedEnv clean;
  ScopedEnv tasks("SLURM_NTASKS", "4"), proc("SLURM_PROCID", "3"), local("SLURM_LOCALID", "1"),
      node("SLURM_NODEID", "1"), nodes("SLURM_NODELIST", "gpu[17-18],cpu3"), job("SLURM_JOB_ID", "1234567"),
      per_node("SLURM_NTASKS_PER_NODE", "2");
  auto env = volt::detect_cluster_environment(2, 2);
  CHECK(env.kind == volt::ClusterKind::slurm);
  CHECK(env.global_rank == 3);
  CHECK(env.local_rank == 1);
  CHECK(env.node_rank == 1);
  CHECK(env.world_size == 4);
  CHECK(env.main_address == "gpu17");
  CHECK(env.main_port == 15000 + 4567);
  CHECK_THROWS_WITH_AS(volt::detect_cluster_environment(4, 1),
                       "You set `devices=4` in Lightning, but the number of tasks per node configured in SLURM "
                       "`--ntasks-per-node=2` does not match. HINT: Set `devices=2`.",
                       std::invalid_argument);
  ScopedEnv interactive("SLURM_JOB_NAME", "bash");
  CHECK(volt::detect_cluster_environment(2, 1).kind == volt::ClusterKind::volt);
}

TEST_CASE("DistributedSampler: disjoint shares, padding, drop_last, shuffle by seed and epoch") {
  // 10 samples, 3 ranks: padded to 12, each rank gets 4; together they cover every sample.
  std::vector<std::size_t> seen;
  for (std::int64_t rank = 0; rank < 3; ++rank) {
    volt::DistributedSampler sampler(10, {.num_replicas = 3, .rank = rank, .shuffle = false});
    CHECK(sampler.num_samples() == 4);
    for (auto index : sampler.indices()) seen.push_back(index);
  }
  CHECK((seen == std::vector<std::size_t>{0, 3, 6, 9, 1, 4, 7, 0, 2, 5, 8, 1}));
  volt::DistributedSampler dropped(10, {.num_replicas = 3, .rank = 2, .shuffle = false, .drop_last = true});
  CHECK((dropped.indices() == std::vector<std::size_t>{2, 5, 8}));

  // Lightning's example: 10 samples, 2 ranks, shuffle with seed 0 -> 5 each, disjoint, a new order each epoch.
  volt::DistributedSampler r0(10, {.num_replicas = 2, .rank = 0, .shuffle = true, .seed = 0});
  volt::DistributedSampler r1(10, {.num_replicas = 2, .rank = 1, .shuffle = true, .seed = 0});
  r0.reset();
  r1.reset();
  auto a = r0.indices(), b = r1.indices();
  CHECK(a.size() == 5);
  std::vector<std::size_t> all = a;
  all.insert(all.end(), b.begin(), b.end());
  std::sort(all.begin(), all.end());
  CHECK((all == std::vector<std::size_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  r0.reset();
  CHECK(r0.indices() != a);
  r0.set_epoch(0);
  r0.reset();
  CHECK(r0.indices() == a);
  // As a torch::data sampler: batches of the rank's indices.
  auto batch = r0.next(3);
  REQUIRE(batch);
  CHECK(batch->size() == 3);
  CHECK_THROWS_WITH_AS(volt::DistributedSampler(4, {.num_replicas = 2, .rank = 2}),
                       "Invalid rank 2, rank should be in the interval [0, 1]", std::invalid_argument);
}

TEST_CASE("RankShard: rank r takes batch r of each complete group; an incomplete last group is left out") {
  std::vector<int> batches{0, 1, 2, 3, 4, 5, 6};
  for (int rank = 0; rank < 2; ++rank) {
    volt::detail::RankShard shard(batches, 2, rank);
    std::vector<int> mine;
    for (int b : shard) mine.push_back(b);
    CHECK(mine == (rank == 0 ? std::vector<int>{0, 2, 4} : std::vector<int>{1, 3, 5}));
    CHECK(shard.size() == 3);
  }
  volt::detail::RankShard three(batches, 3, 2);
  std::vector<int> mine;
  for (int b : three) mine.push_back(b);
  CHECK(mine == std::vector<int>{2, 5});
}

namespace {

/// Ranks 0 and 1 as two threads over a Gloo process group on loopback.
template <class Body>
void with_two_ranks(Body body) {
  const auto errors = volt_test::with_two_ranks([](int) { return torch::Device(torch::kCPU); }, body);
  CHECK(errors[0] == "");
  CHECK(errors[1] == "");
}

}  // namespace

TEST_CASE("ProcessGroup (Gloo): all_reduce sum/mean/max, broadcast, all_gather, barrier (Lightning's numbers)") {
  if (!volt::distributed_support().gloo) {
    MESSAGE("skipped: this build has no Gloo backend");
    return;
  }
  std::vector<double> mean(2), sum(2), maximum(2);
  std::vector<std::vector<float>> gathered(2);
  std::vector<float> broadcasted(2);
  with_two_ranks([&](int rank, volt::ProcessGroup& group) {
    auto r = static_cast<std::size_t>(rank);
    auto t = torch::tensor({static_cast<float>(rank)});
    group.all_reduce(t, volt::ReduceOp::mean);
    mean[r] = t.item<double>();
    auto s = torch::tensor({static_cast<float>(rank + 1)});
    group.all_reduce(s, volt::ReduceOp::sum);
    sum[r] = s.item<double>();
    auto m = torch::tensor({static_cast<float>(rank * 10)});
    group.all_reduce(m, volt::ReduceOp::max);
    maximum[r] = m.item<double>();
    auto b = torch::tensor({rank == 0 ? 42.0f : -1.0f});
    group.broadcast(b, 0);
    broadcasted[r] = b.item<float>();
    for (const auto& part : group.all_gather(torch::tensor({static_cast<float>(rank) + 0.5f}))) {
      gathered[r].push_back(part.item<float>());
    }
    group.barrier();
    CHECK(group.backend_name() == "gloo");
  });
  for (std::size_t r = 0; r < 2; ++r) {
    CHECK(mean[r] == doctest::Approx(0.5));
    CHECK(sum[r] == doctest::Approx(3.0));
    CHECK(maximum[r] == doctest::Approx(10.0));
    CHECK(broadcasted[r] == 42.0f);
    CHECK(gathered[r] == std::vector<float>{0.5f, 1.5f});
  }
}

TEST_CASE("GradientReducer: bucketed all-reduce in backward averages gradients; no_sync leaves them local") {
  if (!volt::distributed_support().gloo) {
    MESSAGE("skipped: this build has no Gloo backend");
    return;
  }
  // Each rank: the same 3-layer MLP, its own half of a batch. Averaged gradients must equal the gradient of
  // the mean loss over the whole batch in one process.
  torch::manual_seed(3);
  auto inputs = torch::randn({8, 5});
  auto targets = torch::randn({8, 2});
  auto make = [] {
    torch::manual_seed(7);
    return torch::nn::Sequential(torch::nn::Linear(5, 16), torch::nn::Tanh(), torch::nn::Linear(16, 16),
                                 torch::nn::Tanh(), torch::nn::Linear(16, 2));
  };
  auto reference = make();
  torch::mse_loss(reference->forward(inputs), targets).backward();

  std::vector<std::vector<torch::Tensor>> grads(2), local(2);
  std::vector<std::size_t> buckets(2);
  // Both ranks' models are made here: make() seeds the process's one default generator, which two threads
  // drawing at once would interleave (the ranks then start from other weights than the reference).
  std::vector<torch::nn::Sequential> models{make(), make()};
  with_two_ranks([&](int rank, volt::ProcessGroup& group) {
    auto& model = models[static_cast<std::size_t>(rank)];
    // Small buckets so several all-reduces overlap backward.
    volt::detail::GradientReducer reducer(group, model->parameters(), /*bucket_bytes=*/600);
    buckets[static_cast<std::size_t>(rank)] = reducer.bucket_count();
    auto mine = inputs.narrow(0, rank * 4, 4);
    auto my_targets = targets.narrow(0, rank * 4, 4);
    reducer.prepare_for_backward(false);  // no_sync: gradients stay local
    torch::mse_loss(model->forward(mine), my_targets).backward();
    reducer.finish();
    for (auto& p : model->parameters()) local[static_cast<std::size_t>(rank)].push_back(p.grad().clone());
    model->zero_grad();
    reducer.prepare_for_backward(true);
    torch::mse_loss(model->forward(mine), my_targets).backward();
    reducer.finish();
    for (auto& p : model->parameters()) grads[static_cast<std::size_t>(rank)].push_back(p.grad().clone());
  });
  CHECK(buckets[0] > 1);
  const auto expected = reference->parameters();
  REQUIRE(grads[0].size() == expected.size());
  // (g0 + g1) / 2 against the gradient of the whole batch: the same sums in another order, whose rounding
  // depends on the machine's kernels and thread count (up to ~2e-7 relative seen on a 32-core host); a wrong
  // average would be off by a factor of two.
  double worst = 0.0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    worst = std::max(worst, (grads[0][i] - expected[i].grad()).abs().max().item<double>());
    CHECK(torch::allclose(grads[0][i], expected[i].grad(), 1e-5, 1e-6));
    CHECK(torch::equal(grads[0][i], grads[1][i]));
  }
  MESSAGE("max |averaged - whole-batch gradient| = " << worst);
  CHECK_FALSE(torch::allclose(local[0][0], local[1][0]));
}

TEST_CASE("KernelCounter: counts top-level operators that do work, not views or their inner calls") {
  volt_test::KernelCounter counter;
  auto a = torch::ones({4});
  counter.take();
  a.add_(1);
  auto b = a.view({2, 2}).narrow(0, 0, 1);
  auto c = torch::cat({a, a});  // one operator however it is carried out inside
  CHECK(counter.take() == std::vector<std::string>{"aten::add_", "aten::cat"});
  CHECK(b.numel() + c.numel() == 10);
  // Inside backward: the operators of the backward pass itself.
  auto x = torch::ones({3}, torch::requires_grad());
  auto y = (x * x).sum();
  counter.take();
  y.backward();
  const auto backward = counter.take();
  CHECK(std::find(backward.begin(), backward.end(), "aten::mul") != backward.end());
}

TEST_CASE("GradientReducer: per synchronised step one cat, at most one division and one multi-tensor copy per "
          "bucket") {
  if (!volt::distributed_support().gloo) {
    MESSAGE("skipped: this build has no Gloo backend");
    return;
  }
  // Work of the reducer = operators of a synchronised backward + finish minus those of the same backward with
  // no_sync (the model's own backward). Before, every gradient was copied into its bucket and back: 2 per
  // parameter plus a division per bucket.
  std::vector<std::vector<std::string>> extra(2);
  std::vector<std::size_t> buckets(2), parameters(2);
  std::vector<double> difference(2);
  with_two_ranks([&](int rank, volt::ProcessGroup& group) {
    const auto r = static_cast<std::size_t>(rank);
    torch::manual_seed(11);
    torch::nn::Sequential model(torch::nn::Linear(5, 16), torch::nn::Tanh(), torch::nn::Linear(16, 16),
                                torch::nn::Tanh(), torch::nn::Linear(16, 16), torch::nn::Tanh(),
                                torch::nn::Linear(16, 2));
    volt::detail::GradientReducer reducer(group, model->parameters(), /*bucket_bytes=*/1200);
    buckets[r] = reducer.bucket_count();
    parameters[r] = model->parameters().size();
    torch::manual_seed(20 + static_cast<std::uint64_t>(rank));  // other data on each rank
    const auto inputs = torch::randn({4, 5});
    const auto targets = torch::randn({4, 2});
    auto step = [&](bool sync) {
      for (auto& p : model->parameters()) p.mutable_grad() = torch::Tensor();
      auto loss = torch::mse_loss(model->forward(inputs), targets);
      volt_test::KernelCounter counter;
      reducer.prepare_for_backward(sync);
      loss.backward();
      reducer.finish();
      return counter.take();
    };
    const auto local = step(false);
    std::vector<torch::Tensor> local_grads;
    for (auto& p : model->parameters()) local_grads.push_back(p.grad().clone());
    auto synced = step(true);
    // The synchronised step did the model's operators and the reducer's: remove the model's, one each.
    for (const auto& name : local) {
      const auto found = std::find(synced.begin(), synced.end(), name);
      REQUIRE(found != synced.end());
      synced.erase(found);
    }
    extra[r] = synced;
    // The averaged gradients did arrive (they differ from this rank's own).
    difference[r] = (model->parameters()[0].grad() - local_grads[0]).abs().max().item<double>();
  });
  for (std::size_t r = 0; r < 2; ++r) {
    CAPTURE(r);
    REQUIRE(buckets[r] > 1);
    const auto count_of = [&](std::string_view name) {
      return static_cast<std::size_t>(std::count(extra[r].begin(), extra[r].end(), name));
    };
    std::string listed;
    for (const auto& name : extra[r]) listed += name + " ";
    MESSAGE("rank " << r << ": " << parameters[r] << " parameters in " << buckets[r]
                    << " buckets; operators of the reducer per step: " << listed);
    CHECK(count_of("aten::cat") == buckets[r]);
    CHECK(count_of("aten::div_") == buckets[r]);  // Gloo has no AVG: one division per bucket
#if VOLT_TORCH_VERSION >= 20400
    CHECK(count_of("aten::_foreach_copy_") == buckets[r]);
    CHECK(extra[r].size() == 3 * buckets[r]);
#else
    CHECK(count_of("aten::copy_") == parameters[r]);  // compat::foreach_copy_ copies one by one before 2.4
    CHECK(extra[r].size() == 2 * buckets[r] + parameters[r]);
#endif
    CHECK(difference[r] > 0.0);
  }
}

TEST_CASE("BufferBroadcaster: every rank gets rank 0's BatchNorm statistics; rank 0 copies nothing back") {
  if (!volt::distributed_support().gloo) {
    MESSAGE("skipped: this build has no Gloo backend");
    return;
  }
  std::vector<std::vector<torch::Tensor>> before(2), after(2);
  std::vector<std::vector<std::string>> work(2);
  with_two_ranks([&](int rank, volt::ProcessGroup& group) {
    const auto r = static_cast<std::size_t>(rank);
    torch::manual_seed(4);
    torch::nn::Sequential model(torch::nn::Linear(3, 8), torch::nn::BatchNorm1d(8), torch::nn::Linear(8, 4),
                                torch::nn::BatchNorm1d(4));
    volt::detail::BufferBroadcaster broadcaster(group, model->buffers());
    // Training forwards on other data on each rank (and a different number of them): other statistics.
    torch::manual_seed(30 + static_cast<std::uint64_t>(rank));
    for (int i = 0; i <= rank + 1; ++i) model->forward(torch::randn({6, 3}));
    for (const auto& buffer : model->buffers()) before[r].push_back(buffer.clone());
    volt_test::KernelCounter counter;
    broadcaster.broadcast();
    work[r] = counter.take();
    for (const auto& buffer : model->buffers()) after[r].push_back(buffer.clone());
  });
  REQUIRE(before[0].size() == 6);  // running_mean, running_var, num_batches_tracked of two BatchNorms
  REQUIRE(after[1].size() == 6);
  bool differed = false;
  for (std::size_t i = 0; i < before[0].size(); ++i) {
    CAPTURE(i);
    differed = differed || !torch::equal(before[0][i], before[1][i]);
    CHECK(torch::equal(after[0][i], before[0][i]));  // rank 0's are the source, unchanged
    CHECK(torch::equal(after[1][i], before[0][i]));  // rank 1 now holds rank 0's
  }
  CHECK(differed);
  CHECK(before[1][2].item<std::int64_t>() == 3);  // rank 1 counted its own 3 batches before
  CHECK(after[1][2].item<std::int64_t>() == 2);   // and has rank 0's count after
  // Two groups (float statistics, int64 counts): rank 0 packs each with one cat; rank 1 unpacks each with one
  // multi-tensor copy.
  CHECK(work[0] == std::vector<std::string>{"aten::cat", "aten::cat"});
#if VOLT_TORCH_VERSION >= 20400
  CHECK(work[1] == std::vector<std::string>{"aten::_foreach_copy_", "aten::_foreach_copy_"});
#else
  CHECK(work[1] == std::vector<std::string>(6, "aten::copy_"));  // compat::foreach_copy_ before LibTorch 2.4
#endif
}

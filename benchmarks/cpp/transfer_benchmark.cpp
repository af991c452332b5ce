// volt::batch_to_device against hand-written loops that move the same 64 tensors.
//
// The batch: an aggregate holding a vector of 32 tensors, a map of 16 and a tuple of 16. Moving CPU tensors to
// the CPU does no tensor work, so the "cpu" figures are the cost of the walk itself; "meta" moves every tensor
// (a new tensor without storage) and shows that cost next to real per-tensor work.
//
//   cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=Release -DVOLT_BUILD_BENCHMARKS=ON
//   cmake --build build-bench --target bench_transfer_benchmark -j2
//   ./build-bench/benchmarks/bench_transfer_benchmark --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <volt/transfer.hpp>

#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace {

template <std::size_t... Index>
auto tensor_tuple_type(std::index_sequence<Index...>) -> std::tuple<decltype((void)Index, torch::Tensor{})...>;
using SixteenTensors = decltype(tensor_tuple_type(std::make_index_sequence<16>{}));

struct Batch {
  std::vector<torch::Tensor> images;              // 32
  std::map<std::string, torch::Tensor> features;  // 16
  SixteenTensors extras;                          // 16
  int64_t step = 0;
};

Batch make_batch() {
  Batch batch;
  for (int index = 0; index < 32; ++index) batch.images.push_back(torch::ones({4, 4}));
  for (int index = 0; index < 16; ++index) batch.features.emplace("feature_" + std::to_string(index), torch::ones({4}));
  std::apply([](auto&... tensors) { ((tensors = torch::ones({2})), ...); }, batch.extras);
  return batch;
}

// What a user writes by hand: `.to(device)` on every tensor, into a new batch.
Batch hand_copy_to(const Batch& batch, torch::Device device) {
  Batch moved;
  moved.images.reserve(batch.images.size());
  for (const auto& tensor : batch.images) moved.images.push_back(tensor.to(device));
  for (const auto& [key, tensor] : batch.features) moved.features.emplace_hint(moved.features.end(), key, tensor.to(device));
  moved.extras = std::apply([&](const auto&... tensors) { return SixteenTensors{tensors.to(device)...}; }, batch.extras);
  moved.step = batch.step;
  return moved;
}

// The same with the same-device shortcut volt takes (LibTorch's `.to` returns the same tensor then anyway).
torch::Tensor to_if_elsewhere(const torch::Tensor& tensor, torch::Device device) {
  return tensor.device() == device ? tensor : tensor.to(device);
}

Batch hand_copy_checked(const Batch& batch, torch::Device device) {
  Batch moved;
  moved.images.reserve(batch.images.size());
  for (const auto& tensor : batch.images) moved.images.push_back(to_if_elsewhere(tensor, device));
  for (const auto& [key, tensor] : batch.features) {
    moved.features.emplace_hint(moved.features.end(), key, to_if_elsewhere(tensor, device));
  }
  moved.extras = std::apply([&](const auto&... tensors) { return SixteenTensors{to_if_elsewhere(tensors, device)...}; },
                            batch.extras);
  moved.step = batch.step;
  return moved;
}

// In place, for the rvalue case: the containers are reused.
void hand_in_place_checked(Batch& batch, torch::Device device) {
  for (auto& tensor : batch.images) tensor = to_if_elsewhere(tensor, device);
  for (auto& entry : batch.features) entry.second = to_if_elsewhere(entry.second, device);
  std::apply([&](auto&... tensors) { ((tensors = to_if_elsewhere(tensors, device)), ...); }, batch.extras);
}

void hand_in_place_to(Batch& batch, torch::Device device) {
  for (auto& tensor : batch.images) tensor = tensor.to(device);
  for (auto& entry : batch.features) entry.second = entry.second.to(device);
  std::apply([&](auto&... tensors) { ((tensors = tensors.to(device)), ...); }, batch.extras);
}

torch::Device device_of(const benchmark::State& state) {
  return state.range(0) == 0 ? torch::Device(torch::kCPU) : torch::Device(torch::kMeta);
}

void label(benchmark::State& state) { state.SetLabel(state.range(0) == 0 ? "cpu (no tensor work)" : "meta"); }

void BM_volt_copy(benchmark::State& state) {
  const Batch batch = make_batch();
  const auto device = device_of(state);
  for (auto _ : state) {
    Batch moved = volt::batch_to_device(batch, device);
    benchmark::DoNotOptimize(moved);
  }
  label(state);
}

void BM_hand_copy_to(benchmark::State& state) {
  const Batch batch = make_batch();
  const auto device = device_of(state);
  for (auto _ : state) {
    Batch moved = hand_copy_to(batch, device);
    benchmark::DoNotOptimize(moved);
  }
  label(state);
}

void BM_hand_copy_checked(benchmark::State& state) {
  const Batch batch = make_batch();
  const auto device = device_of(state);
  for (auto _ : state) {
    Batch moved = hand_copy_checked(batch, device);
    benchmark::DoNotOptimize(moved);
  }
  label(state);
}

// Rvalue: the batch goes in by move and comes back; CPU only (to meta it would stay on meta after one round).
void BM_volt_move(benchmark::State& state) {
  Batch batch = make_batch();
  const torch::Device device(torch::kCPU);
  for (auto _ : state) {
    batch = volt::batch_to_device(std::move(batch), device);
    benchmark::DoNotOptimize(batch);
  }
}

void BM_hand_in_place_checked(benchmark::State& state) {
  Batch batch = make_batch();
  const torch::Device device(torch::kCPU);
  for (auto _ : state) {
    hand_in_place_checked(batch, device);
    benchmark::DoNotOptimize(batch);
  }
}

void BM_hand_in_place_to(benchmark::State& state) {
  Batch batch = make_batch();
  const torch::Device device(torch::kCPU);
  for (auto _ : state) {
    hand_in_place_to(batch, device);
    benchmark::DoNotOptimize(batch);
  }
}

}  // namespace

BENCHMARK(BM_volt_copy)->Arg(0)->Arg(1);
BENCHMARK(BM_hand_copy_checked)->Arg(0)->Arg(1);
BENCHMARK(BM_hand_copy_to)->Arg(0)->Arg(1);
BENCHMARK(BM_volt_move);
BENCHMARK(BM_hand_in_place_checked);
BENCHMARK(BM_hand_in_place_to);

BENCHMARK_MAIN();

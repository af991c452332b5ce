#include "test_common.hpp"


#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

using volt_test::tensor_devices;

// The transfer suite with CUDA as the target. Without a GPU every case reports that it did not run.
namespace {

bool cuda_missing() {
  if (torch::cuda::is_available()) return false;
  MESSAGE("skipped: no CUDA device (torch::cuda::is_available() is false)");
  return true;
}

struct Sample {
  torch::Tensor input;
  std::vector<torch::Tensor> extra;
  std::string id;
};

template <class Batch>
void check_all_on(const Batch& batch, torch::Device device, std::size_t expected_count) {
  const auto devices = tensor_devices(batch);
  CHECK(devices.size() == expected_count);
  for (const auto& tensor_device : devices) CHECK((tensor_device == device));
}

}  // namespace

TEST_SUITE("transfer_cuda") {
  TEST_CASE("batch_to_device to cuda:0: nested batches, every tensor moved") {
    if (cuda_missing()) return;
    const torch::Device cuda{torch::kCUDA, 0};
    using Batch = std::tuple<std::vector<std::map<std::string, Sample>>, std::optional<torch::Tensor>,
                             std::variant<int, torch::data::Example<>>, c10::List<torch::Tensor>>;
    const Sample sample{torch::ones({2, 3}), {torch::zeros({1}, torch::kLong), torch::ones({4}, torch::kBool)}, "s"};
    c10::List<torch::Tensor> list;
    list.push_back(torch::ones({2}));
    const Batch batch{{{{"a", sample}, {"b", sample}}}, torch::ones({1}),
                      torch::data::Example<>{torch::ones({2}), torch::zeros({2})}, list};
    const Batch moved = volt::batch_to_device(batch, cuda);
    check_all_on(moved, cuda, 2 * 3 + 1 + 2 + 1);
    check_all_on(batch, torch::Device(torch::kCPU), 2 * 3 + 1 + 2 + 1);
    CHECK((std::get<0>(moved)[0].at("a").extra[0].scalar_type() == torch::kLong));
    CHECK(torch::equal(std::get<0>(moved)[0].at("b").input.cpu(), sample.input));

    // Already there: the same tensors come back; and back to the CPU.
    const Batch again = volt::batch_to_device(moved, cuda);
    CHECK(std::get<1>(again)->unsafeGetTensorImpl() == std::get<1>(moved)->unsafeGetTensorImpl());
    check_all_on(volt::batch_to_device(moved, torch::Device(torch::kCPU)), torch::Device(torch::kCPU), 10);
  }

  TEST_CASE("batch_to_device to \"cuda\" without an index, and to every visible GPU") {
    if (cuda_missing()) return;
    const std::vector<torch::Tensor> batch{torch::ones({1}), torch::ones({1})};
    for (const auto& tensor : volt::batch_to_device(batch, torch::Device("cuda"))) CHECK(tensor.is_cuda());
    for (int64_t index = 0; index < static_cast<int64_t>(torch::cuda::device_count()); ++index) {
      const torch::Device device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
      check_all_on(volt::batch_to_device(batch, device), device, 2);
    }
  }

  TEST_CASE("batch_to_device to cuda:0: modules and rvalue batches") {
    if (cuda_missing()) return;
    const torch::Device cuda{torch::kCUDA, 0};
    torch::nn::Linear linear(3, 2);
    auto moved = volt::batch_to_device(std::make_tuple(linear, torch::ones({1, 3})), cuda);
    CHECK(std::get<0>(moved).ptr() == linear.ptr());
    CHECK(linear->weight.is_cuda());
    CHECK(std::get<1>(moved).is_cuda());
    CHECK(std::get<0>(moved)->forward(std::get<1>(moved)).is_cuda());

    std::vector<torch::Tensor> vector{torch::ones({8}), torch::ones({8})};
    const auto* elements = vector.data();
    const auto on_gpu = volt::batch_to_device(std::move(vector), cuda);
    CHECK(on_gpu.data() == elements);
    check_all_on(on_gpu, cuda, 2);
    torch::cuda::synchronize();  // the copies were non-blocking
    CHECK(on_gpu[0].sum().item<float>() == 8.0f);
  }
}

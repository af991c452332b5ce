#include "test_common.hpp"


#include <array>
#include <deque>
#include <forward_list>
#include <list>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

using volt_test::tensor_devices;

// LibTorch builds without a GPU can still create tensors on the meta device (shape and dtype, no storage):
// a real device change, observable on any machine.
namespace {

const torch::Device cpu{torch::kCPU};
const torch::Device meta{torch::kMeta};

torch::Tensor cpu_tensor(int64_t size = 2) { return torch::ones({size}); }

template <class Batch>
bool all_on(const Batch& batch, torch::Device device, std::size_t expected_count) {
  const auto devices = tensor_devices(batch);
  if (devices.size() != expected_count) return false;
  for (const auto& tensor_device : devices) {
    if (tensor_device != device) return false;
  }
  return true;
}

// The C++ namedtuple / dataclass.
struct ImageBatch {
  torch::Tensor images;
  torch::Tensor labels;
  std::string split;
  int64_t index = 0;
};

// Records what volt passed to its `.to` (Lightning passes only the device to non-tensors).
struct RecordingValue {
  torch::Tensor payload;
  mutable std::vector<std::pair<torch::Device, bool>> calls;
  RecordingValue to(torch::Device device, bool non_blocking = false) const {
    calls.emplace_back(device, non_blocking);
    return RecordingValue{payload.to(device), calls};
  }
};

// `.to` that returns nothing: Lightning keeps the object, which this one changed in place.
struct InPlaceValue {
  torch::Tensor payload;
  int moves = 0;
  void to(torch::Device device) {
    payload = payload.to(device);
    ++moves;
  }
};

// `.to` that returns a reference to itself, the usual "return *this".
struct SelfReturningValue {
  torch::Tensor payload;
  std::vector<int> big = std::vector<int>(1000, 7);
  SelfReturningValue& to(torch::Device device) {
    payload = payload.to(device);
    return *this;
  }
};

// An aggregate with a `.to` (Lightning B21): `.to` is called, the fields are not recursed into.
struct AggregateWithTo {
  torch::Tensor moved_by_to;
  torch::Tensor left_alone;
  AggregateWithTo to(torch::Device device) const { return {moved_by_to.to(device), left_alone}; }
};

// A data member named `to` (Lightning B22: a non-callable `to` attribute): an ordinary aggregate.
struct DataMemberNamedTo {
  int to = 5;
  torch::Tensor tensor;
};

// Counts copies, to prove what volt does not copy.
struct CopyCounter {
  static inline int copies = 0;
  torch::Tensor payload;
  CopyCounter() = default;
  explicit CopyCounter(torch::Tensor tensor) : payload(std::move(tensor)) {}
  CopyCounter(const CopyCounter& other) : payload(other.payload) { ++copies; }
  CopyCounter(CopyCounter&&) = default;
  CopyCounter& operator=(const CopyCounter& other) {
    payload = other.payload;
    ++copies;
    return *this;
  }
  CopyCounter& operator=(CopyCounter&&) = default;
  CopyCounter to(torch::Device device) && { return CopyCounter{std::move(payload).to(device)}; }
};

// A class volt cannot see into (private tensor, no `.to`): returned as is.
class Opaque {
 public:
  explicit Opaque(torch::Tensor tensor) : tensor_(std::move(tensor)) {}
  const torch::Tensor& tensor() const { return tensor_; }

 private:
  torch::Tensor tensor_;
};

// A user type taught to volt through the customization point; it also has a `.to` and fields, which the
// specialization overrides.
struct CustomBatch {
  torch::Tensor moved;
  torch::Tensor kept;
  int to_calls = 0;
  CustomBatch to(torch::Device) const { return {moved, kept, to_calls + 1}; }
};

struct RecordingModuleImpl : torch::nn::Module {
  using torch::nn::Module::to;
  std::vector<std::pair<torch::Device, bool>> calls;
  void to(torch::Device device, bool non_blocking = false) override { calls.emplace_back(device, non_blocking); }
};
TORCH_MODULE(RecordingModule);

struct TensorLess {
  bool operator()(const torch::Tensor& left, const torch::Tensor& right) const {
    return left.unsafeGetTensorImpl() < right.unsafeGetTensorImpl();
  }
};

}  // namespace

template <>
struct volt::batch_transfer<CustomBatch> {
  static CustomBatch to_device(CustomBatch batch, torch::Device device) {
    return {volt::batch_to_device(std::move(batch.moved), device), batch.kept, -1};
  }
};

TEST_SUITE("transfer") {
  TEST_CASE("batch_to_device: a tensor moves, keeps its dtype, and is not copied when already there (B7, B27)") {
    const auto floats = cpu_tensor();
    const auto same = volt::batch_to_device(floats, cpu);
    CHECK(same.unsafeGetTensorImpl() == floats.unsafeGetTensorImpl());

    for (const auto dtype : {torch::kFloat, torch::kLong, torch::kBool, torch::kHalf}) {
      const auto moved = volt::batch_to_device(torch::zeros({3}, dtype), meta);
      CHECK((moved.device() == meta));
      CHECK((moved.scalar_type() == dtype));
    }
    CHECK((floats.device() == cpu));

    torch::Tensor undefined;
    CHECK_FALSE(volt::batch_to_device(undefined, meta).defined());
  }

  TEST_CASE("batch_to_device: sequence containers") {
    const std::vector<torch::Tensor> vector{cpu_tensor(), cpu_tensor()};
    CHECK(all_on(volt::batch_to_device(vector, meta), meta, 2));
    CHECK(all_on(vector, cpu, 2));

    const std::deque<torch::Tensor> deque{cpu_tensor(), cpu_tensor(), cpu_tensor()};
    CHECK(all_on(volt::batch_to_device(deque, meta), meta, 3));

    const std::list<torch::Tensor> list{cpu_tensor()};
    CHECK(all_on(volt::batch_to_device(list, meta), meta, 1));

    std::forward_list<torch::Tensor> forward_list{cpu_tensor(), cpu_tensor()};
    const auto moved_forward_list = volt::batch_to_device(forward_list, meta);
    for (const auto& tensor : moved_forward_list) CHECK((tensor.device() == meta));

    const std::array<torch::Tensor, 2> array{cpu_tensor(), cpu_tensor()};
    const std::array<torch::Tensor, 2> moved_array = volt::batch_to_device(array, meta);
    CHECK((moved_array[0].device() == meta));
    CHECK((moved_array[1].device() == meta));
  }

  TEST_CASE("batch_to_device: tuple and pair") {
    const auto tuple = std::make_tuple(cpu_tensor(), std::string("s"), 3, cpu_tensor());
    const auto moved_tuple = volt::batch_to_device(tuple, meta);
    CHECK((std::get<0>(moved_tuple).device() == meta));
    CHECK(std::get<1>(moved_tuple) == "s");
    CHECK(std::get<2>(moved_tuple) == 3);
    CHECK((std::get<3>(moved_tuple).device() == meta));

    const std::pair<torch::Tensor, double> pair{cpu_tensor(), 0.5};
    const auto moved_pair = volt::batch_to_device(pair, meta);
    CHECK((moved_pair.first.device() == meta));
    CHECK(moved_pair.second == 0.5);

    // A reference element refers to something the batch does not own: it is kept, not moved.
    torch::Tensor referenced = cpu_tensor();
    std::tuple<torch::Tensor&, torch::Tensor> with_reference{referenced, cpu_tensor()};
    auto moved_with_reference = volt::batch_to_device(with_reference, meta);
    CHECK(&std::get<0>(moved_with_reference) == &referenced);
    CHECK((referenced.device() == cpu));
    CHECK((std::get<1>(moved_with_reference).device() == meta));
  }

  TEST_CASE("batch_to_device: associative containers move values and keep keys") {
    const std::map<std::string, torch::Tensor> map{{"a", cpu_tensor()}, {"b", cpu_tensor()}};
    const auto moved_map = volt::batch_to_device(map, meta);
    CHECK(moved_map.size() == 2);
    CHECK((moved_map.at("a").device() == meta));
    CHECK((moved_map.at("b").device() == meta));

    const std::unordered_map<int, torch::Tensor> unordered{{1, cpu_tensor()}, {2, cpu_tensor()}};
    CHECK(all_on(volt::batch_to_device(unordered, meta), meta, 2));

    const std::multimap<int, torch::Tensor> multimap{{1, cpu_tensor()}, {1, cpu_tensor()}};
    CHECK(all_on(volt::batch_to_device(multimap, meta), meta, 2));

    // Keys that are tensors are keys: untouched (Lightning moves dict values only).
    const std::map<torch::Tensor, torch::Tensor, TensorLess> keyed{{cpu_tensor(), cpu_tensor()}};
    const auto moved_keyed = volt::batch_to_device(keyed, meta);
    CHECK((moved_keyed.begin()->first.device() == cpu));
    CHECK((moved_keyed.begin()->second.device() == meta));
  }

  TEST_CASE("batch_to_device: optional and variant") {
    const std::optional<torch::Tensor> some = cpu_tensor();
    CHECK((volt::batch_to_device(some, meta)->device() == meta));
    const std::optional<torch::Tensor> none;
    CHECK_FALSE(volt::batch_to_device(none, meta).has_value());
    // LibTorch's own optional (a separate template before 2.x, an alias of std::optional after).
    const c10::optional<torch::Tensor> c10_some = cpu_tensor();
    CHECK((volt::batch_to_device(c10_some, meta)->device() == meta));
    const std::optional<std::optional<torch::Tensor>> nested = std::optional<torch::Tensor>{cpu_tensor()};
    CHECK((volt::batch_to_device(nested, meta).value()->device() == meta));

    using Variant = std::variant<std::monostate, int, torch::Tensor, std::vector<torch::Tensor>>;
    const Variant tensor_alternative = cpu_tensor();
    const auto moved_tensor_alternative = volt::batch_to_device(tensor_alternative, meta);
    CHECK((std::get<torch::Tensor>(moved_tensor_alternative).device() == meta));
    const Variant vector_alternative = std::vector<torch::Tensor>{cpu_tensor(), cpu_tensor()};
    CHECK(all_on(std::get<3>(volt::batch_to_device(vector_alternative, meta)), meta, 2));
    const Variant int_alternative = 4;
    CHECK(std::get<int>(volt::batch_to_device(int_alternative, meta)) == 4);
    CHECK(volt::batch_to_device(Variant{}, meta).index() == 0);
  }

  TEST_CASE("batch_to_device: torch::data::Example with and without a target") {
    const torch::data::Example<> example{cpu_tensor(), torch::zeros({2}, torch::kLong)};
    const auto moved = volt::batch_to_device(example, meta);
    CHECK((moved.data.device() == meta));
    CHECK((moved.target.device() == meta));
    CHECK((moved.target.scalar_type() == torch::kLong));

    const torch::data::TensorExample unlabeled{cpu_tensor()};
    CHECK((volt::batch_to_device(unlabeled, meta).data.device() == meta));

    const std::vector<torch::data::Example<>> examples(3, example);
    CHECK(all_on(volt::batch_to_device(examples, meta), meta, 6));
  }

  TEST_CASE("batch_to_device: aggregate structs (namedtuple / dataclass, B12, B13)") {
    const ImageBatch batch{cpu_tensor(), torch::zeros({2}, torch::kLong), "train", 7};
    const ImageBatch moved = volt::batch_to_device(batch, meta);
    CHECK((moved.images.device() == meta));
    CHECK((moved.labels.device() == meta));
    CHECK(moved.split == "train");
    CHECK(moved.index == 7);
    CHECK((batch.images.device() == cpu));

    const std::vector<ImageBatch> batches{batch, batch};
    CHECK(all_on(volt::batch_to_device(batches, meta), meta, 4));

    // A data member named `to` does not make a value transferable (B22): the aggregate is recursed into.
    const DataMemberNamedTo with_data_member{5, cpu_tensor()};
    const auto moved_with_data_member = volt::batch_to_device(with_data_member, meta);
    CHECK(moved_with_data_member.to == 5);
    CHECK((moved_with_data_member.tensor.device() == meta));
  }

  TEST_CASE("batch_to_device: c10::List and c10::Dict, without touching the input's shared storage") {
    c10::List<torch::Tensor> list;
    list.push_back(cpu_tensor());
    list.push_back(cpu_tensor());
    const auto moved_list = volt::batch_to_device(list, meta);
    CHECK((moved_list.get(0).device() == meta));
    CHECK((moved_list.get(1).device() == meta));
    CHECK((list.get(0).device() == cpu));  // c10::List copies alias: a new list was made

    c10::Dict<std::string, torch::Tensor> dict;
    dict.insert("x", cpu_tensor());
    const auto moved_dict = volt::batch_to_device(dict, meta);
    CHECK((moved_dict.at("x").device() == meta));
    CHECK((dict.at("x").device() == cpu));
  }

  TEST_CASE("batch_to_device: nested mixes (B8-B11)") {
    using Nested = std::tuple<std::vector<std::map<std::string, ImageBatch>>,
                              std::optional<std::pair<torch::Tensor, std::deque<torch::Tensor>>>,
                              std::array<std::variant<int, torch::data::Example<>>, 2>, std::string>;
    const ImageBatch image{cpu_tensor(), cpu_tensor(), "val", 1};
    const Nested nested{{{{"a", image}, {"b", image}}, {{"c", image}}},
                        std::pair{cpu_tensor(), std::deque<torch::Tensor>{cpu_tensor(), cpu_tensor()}},
                        {{3, torch::data::Example<>{cpu_tensor(), cpu_tensor()}}},
                        "tag"};
    const Nested moved = volt::batch_to_device(nested, meta);
    CHECK(all_on(moved, meta, 6 + 3 + 2));
    CHECK(all_on(nested, cpu, 6 + 3 + 2));
    CHECK(std::get<0>(moved)[0].at("a").split == "val");
    CHECK(std::get<int>(std::get<2>(moved)[0]) == 3);
    CHECK(std::get<3>(moved) == "tag");

    // Lightning B11: ([t, t], [{"a": t, "b": t}])
    const std::tuple<std::vector<torch::Tensor>, std::vector<std::map<std::string, torch::Tensor>>> b11{
        {cpu_tensor(), cpu_tensor()}, {{{"a", cpu_tensor()}, {"b", cpu_tensor()}}}};
    CHECK(all_on(volt::batch_to_device(b11, meta), meta, 4));
  }

  TEST_CASE("batch_to_device: values passed through unchanged (B1-B6, B23)") {
    CHECK(volt::batch_to_device(1.5, meta) == 1.5);
    CHECK(volt::batch_to_device(3, meta) == 3);
    CHECK(volt::batch_to_device(true, meta) == true);
    CHECK(volt::batch_to_device(std::string("x"), meta) == "x");
    CHECK(volt::batch_to_device(std::string_view("view"), meta) == "view");
    CHECK_FALSE(volt::batch_to_device(std::optional<int>{}, meta).has_value());
    static_assert(std::is_same_v<decltype(volt::batch_to_device(std::nullopt, meta)), std::nullopt_t>);
    CHECK((volt::batch_to_device(std::monostate{}, meta) == std::monostate{}));
    CHECK(volt::batch_to_device(std::vector<torch::Tensor>{}, meta).empty());
    CHECK(volt::batch_to_device(std::map<std::string, torch::Tensor>{}, meta).empty());
    CHECK((volt::batch_to_device(std::vector<bool>{true, false}, meta) == std::vector<bool>{true, false}));
    const auto b6 = volt::batch_to_device(
        std::map<std::string, std::variant<std::monostate, std::pair<int, int>>>{{"x", std::pair{1, 2}},
                                                                                 {"y", std::monostate{}}},
        meta);
    CHECK((std::get<1>(b6.at("x")) == std::pair{1, 2}));

    const c10::Scalar scalar = 2.5;  // has a template member `to<T>()`: a conversion, not a move
    CHECK(volt::batch_to_device(scalar, meta).toDouble() == 2.5);

    // Sets are not recursed into, as in Lightning.
    const std::set<torch::Tensor, TensorLess> set{cpu_tensor()};
    CHECK((volt::batch_to_device(set, meta).begin()->device() == cpu));
    const std::unordered_set<int> numbers{1, 2};
    CHECK(volt::batch_to_device(numbers, meta) == numbers);

    const Opaque opaque{cpu_tensor()};
    CHECK((volt::batch_to_device(opaque, meta).tensor().device() == cpu));
    const std::shared_ptr<torch::Tensor> pointer = std::make_shared<torch::Tensor>(cpu_tensor());
    CHECK(volt::batch_to_device(pointer, meta) == pointer);
  }

  TEST_CASE("batch_to_device: user types with a `.to` (B14, B15, B21)") {
    SUBCASE("returning a value: called with the device only, never non_blocking") {
      const RecordingValue value{cpu_tensor(), {}};
      const RecordingValue moved = volt::batch_to_device(value, meta);
      REQUIRE(value.calls.size() == 1);
      CHECK((value.calls[0].first == meta));
      CHECK_FALSE(value.calls[0].second);
      CHECK((moved.payload.device() == meta));
    }
    SUBCASE("returning void: the value it changed is kept; an lvalue argument is left alone") {
      const InPlaceValue value{cpu_tensor(), 0};
      const InPlaceValue moved = volt::batch_to_device(value, meta);
      CHECK(moved.moves == 1);
      CHECK((moved.payload.device() == meta));
      CHECK(value.moves == 0);
      CHECK((value.payload.device() == cpu));
      const auto in_vector = volt::batch_to_device(std::vector<InPlaceValue>{value, value}, meta);
      CHECK(in_vector[1].moves == 1);
    }
    SUBCASE("returning a reference to itself: an rvalue is moved through, not copied") {
      SelfReturningValue value{cpu_tensor()};
      const int* storage = value.big.data();
      const SelfReturningValue moved = volt::batch_to_device(std::move(value), meta);
      CHECK((moved.payload.device() == meta));
      CHECK(moved.big.data() == storage);

      const SelfReturningValue kept{cpu_tensor()};
      const SelfReturningValue copy = volt::batch_to_device(kept, meta);
      CHECK((copy.payload.device() == meta));
      CHECK((kept.payload.device() == cpu));
    }
    SUBCASE("an aggregate with `.to` is not recursed into (B21)") {
      const AggregateWithTo value{cpu_tensor(), cpu_tensor()};
      const auto moved = volt::batch_to_device(value, meta);
      CHECK((moved.moved_by_to.device() == meta));
      CHECK((moved.left_alone.device() == cpu));
    }
    SUBCASE("an rvalue-qualified `.to` runs on the rvalue, or on one copy of an lvalue") {
      CopyCounter::copies = 0;
      auto moved = volt::batch_to_device(std::vector<CopyCounter>(3, CopyCounter{cpu_tensor()}), meta);
      const int copies_to_build_the_vector = CopyCounter::copies;
      CHECK(copies_to_build_the_vector == 3);
      CHECK((moved[2].payload.device() == meta));
      const CopyCounter lvalue{cpu_tensor()};
      CopyCounter::copies = 0;
      CHECK((volt::batch_to_device(lvalue, meta).payload.device() == meta));
      CHECK(CopyCounter::copies == 1);
    }
  }

  TEST_CASE("batch_to_device: the volt::batch_transfer specialization wins over `.to` and structure") {
    const CustomBatch batch{cpu_tensor(), cpu_tensor(), 0};
    const auto moved = volt::batch_to_device(batch, meta);
    CHECK(moved.to_calls == -1);
    CHECK((moved.moved.device() == meta));
    CHECK((moved.kept.device() == cpu));
    const auto in_map = volt::batch_to_device(std::map<int, CustomBatch>{{1, batch}}, meta);
    CHECK(in_map.at(1).to_calls == -1);
  }

  TEST_CASE("batch_to_device: modules move in place; the same holder comes back (B24)") {
    RecordingModule module;
    const auto moved = volt::batch_to_device(module, meta);
    CHECK(moved.ptr() == module.ptr());
    REQUIRE(module->calls.size() == 1);
    CHECK((module->calls[0].first == meta));
    CHECK_FALSE(module->calls[0].second);

    const std::shared_ptr<RecordingModuleImpl> pointer = std::make_shared<RecordingModuleImpl>();
    const auto moved_pointer = volt::batch_to_device(std::make_tuple(pointer, cpu_tensor()), meta);
    CHECK(std::get<0>(moved_pointer) == pointer);
    CHECK(pointer->calls.size() == 1);
    CHECK((std::get<1>(moved_pointer).device() == meta));

    torch::nn::Linear linear(2, 3);
    const auto weight = linear->weight.unsafeGetTensorImpl();
    CHECK(volt::batch_to_device(linear, cpu).ptr() == linear.ptr());
    CHECK(linear->weight.unsafeGetTensorImpl() == weight);

    const RecordingModule empty{nullptr};
    CHECK(volt::batch_to_device(empty, meta).is_empty());
  }

  TEST_CASE("batch_to_device: non_blocking only for tensors, and never to the CPU or MPS (PyTorch #83015)") {
    CHECK_FALSE(volt::transfer_is_non_blocking(torch::Device("cpu")));
    CHECK_FALSE(volt::transfer_is_non_blocking(torch::Device("mps")));
    CHECK_FALSE(volt::transfer_is_non_blocking(torch::Device("mps:0")));
    CHECK(volt::transfer_is_non_blocking(torch::Device("cuda")));
    CHECK(volt::transfer_is_non_blocking(torch::Device("cuda:1")));
    CHECK(volt::transfer_is_non_blocking(torch::Device("meta")));
    // Values with their own `.to` get the device only, whatever the target (Lightning's rule).
    for (const auto device : {torch::Device("cpu"), torch::Device("meta")}) {
      const RecordingValue value{cpu_tensor(), {}};
      (void)volt::batch_to_device(value, device);
      REQUIRE(value.calls.size() == 1);
      CHECK_FALSE(value.calls[0].second);
    }
  }

  TEST_CASE("batch_to_device: rvalue batches are moved from, never copied") {
    std::vector<torch::Tensor> vector{cpu_tensor(), cpu_tensor()};
    const auto* elements = vector.data();
    const auto* first_impl = vector[0].unsafeGetTensorImpl();
    const auto same_device = volt::batch_to_device(std::move(vector), cpu);
    CHECK(same_device.data() == elements);
    CHECK(same_device[0].unsafeGetTensorImpl() == first_impl);
    CHECK(vector.empty());  // NOLINT(bugprone-use-after-move): moved-from is what is checked

    std::map<std::string, torch::Tensor> map{{"a", cpu_tensor()}};
    const auto* node_value = &map.at("a");
    const auto moved_map = volt::batch_to_device(std::move(map), meta);
    CHECK(&moved_map.at("a") == node_value);  // the same node, rebuilt in place
    CHECK((moved_map.at("a").device() == meta));

    ImageBatch batch{cpu_tensor(), cpu_tensor(), std::string(100, 'x'), 0};
    const char* text = batch.split.data();
    const auto* images = batch.images.unsafeGetTensorImpl();
    const ImageBatch moved_batch = volt::batch_to_device(std::move(batch), cpu);
    CHECK(moved_batch.split.data() == text);
    CHECK(moved_batch.images.unsafeGetTensorImpl() == images);

    c10::List<torch::Tensor> list;
    list.push_back(cpu_tensor());
    const auto moved_list = volt::batch_to_device(std::move(list), meta);
    CHECK((moved_list.get(0).device() == meta));
  }

  TEST_CASE("batch_to_device: lvalue batches already on the device share every tensor") {
    const std::tuple<std::vector<torch::Tensor>, ImageBatch> batch{{cpu_tensor(), cpu_tensor()},
                                                                   {cpu_tensor(), cpu_tensor(), "s", 0}};
    const auto moved = volt::batch_to_device(batch, cpu);
    CHECK(std::get<0>(moved)[1].unsafeGetTensorImpl() == std::get<0>(batch)[1].unsafeGetTensorImpl());
    CHECK(std::get<1>(moved).labels.unsafeGetTensorImpl() == std::get<1>(batch).labels.unsafeGetTensorImpl());
  }
}

#include "test_common.hpp"


#include <array>
#include <concepts>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <variant>
#include <vector>

namespace {

struct Pair {
  torch::Tensor first;
  std::string name;
};

struct WithConstField {
  const torch::Tensor tensor;
  int number;
};

struct WithConstReference {
  const torch::Tensor& referenced;
  torch::Tensor owned;
};

struct WithReference {
  torch::Tensor& referenced;
};

struct Sixteen {
  torch::Tensor f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15;
};

struct ThirtyTwo {
  int f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15;
  int f16, f17, f18, f19, f20, f21, f22, f23, f24, f25, f26, f27, f28, f29, f30;
  torch::Tensor last;
};

struct Empty {};

torch::Tensor to_double_if_floating(const torch::Tensor& tensor) {
  return tensor.defined() && tensor.is_floating_point() ? tensor.to(torch::kDouble) : tensor;
}

const auto cast_to_double = [](const torch::Tensor& tensor) { return to_double_if_floating(tensor); };

bool is_double(const torch::Tensor& tensor) { return tensor.scalar_type() == torch::kDouble; }

}  // namespace

TEST_SUITE("apply_to_collection") {
  TEST_CASE("apply_to_collection: the precision use, through every container kind") {
    using Batch = std::tuple<std::vector<torch::Tensor>, std::map<std::string, torch::Tensor>, Pair, double,
                             std::optional<torch::Tensor>, std::deque<torch::Tensor>, std::list<torch::Tensor>,
                             std::array<torch::Tensor, 1>, std::pair<torch::Tensor, int>,
                             std::unordered_map<int, torch::Tensor>, std::variant<int, torch::Tensor>,
                             torch::data::Example<>>;
    const Batch batch{{torch::ones({2}), torch::ones({2}, torch::kLong)},
                      {{"a", torch::ones({1})}},
                      {torch::ones({3}), "p"},
                      1.5,
                      torch::ones({1}),
                      {torch::ones({1})},
                      {torch::ones({1})},
                      {torch::ones({1})},
                      {torch::ones({1}), 4},
                      {{1, torch::ones({1})}},
                      torch::ones({1}),
                      {torch::ones({1}), torch::zeros({1}, torch::kLong)}};
    const Batch out = volt::apply_to_collection(batch, cast_to_double);
    CHECK(is_double(std::get<0>(out)[0]));
    CHECK((std::get<0>(out)[1].scalar_type() == torch::kLong));
    CHECK(is_double(std::get<1>(out).at("a")));
    CHECK(is_double(std::get<2>(out).first));
    CHECK(std::get<2>(out).name == "p");
    CHECK(std::get<3>(out) == 1.5);
    CHECK(is_double(*std::get<4>(out)));
    CHECK(is_double(std::get<5>(out).front()));
    CHECK(is_double(std::get<6>(out).front()));
    CHECK(is_double(std::get<7>(out)[0]));
    CHECK(is_double(std::get<8>(out).first));
    CHECK(std::get<8>(out).second == 4);
    CHECK(is_double(std::get<9>(out).at(1)));
    CHECK(is_double(std::get<torch::Tensor>(std::get<10>(out))));
    CHECK(is_double(std::get<11>(out).data));
    CHECK((std::get<11>(out).target.scalar_type() == torch::kLong));
    CHECK((std::get<0>(batch)[0].scalar_type() == torch::kFloat));  // the input is untouched
  }

  TEST_CASE("apply_to_collection: a concrete parameter type matches that exact type, never a conversion") {
    int tensor_calls = 0;
    const auto count_tensors = [&](const torch::Tensor& tensor) {
      ++tensor_calls;
      return tensor;
    };
    const auto batch = std::make_tuple(1.5, 3, true, c10::Scalar(2), std::string("s"), torch::ones({1}));
    const auto out = volt::apply_to_collection(batch, count_tensors);
    CHECK(tensor_calls == 1);
    CHECK(std::get<0>(out) == 1.5);

    // A function taking double sees doubles only: not ints, floats or bools.
    const auto numbers = std::make_tuple(1.5, 2, 2.5f, true, std::vector<double>{1.0, 2.0});
    const auto doubled = volt::apply_to_collection(numbers, [](double value) { return value * 2; });
    CHECK(std::get<0>(doubled) == 3.0);
    CHECK(std::get<1>(doubled) == 2);
    CHECK(std::get<2>(doubled) == 2.5f);
    CHECK((std::get<4>(doubled) == std::vector<double>{2.0, 4.0}));

    // Function pointers and std::function follow the same rule.
    CHECK(is_double(std::get<5>(volt::apply_to_collection(batch, &to_double_if_floating))));
    const std::function<torch::Tensor(const torch::Tensor&)> function = cast_to_double;
    CHECK(is_double(std::get<5>(volt::apply_to_collection(batch, function))));
  }

  TEST_CASE("apply_to_collection: generic lambdas select leaves through their constraints") {
    const auto batch = std::make_tuple(1.5, 2, std::vector<float>{1.f}, std::string("s"));
    const auto out = volt::apply_to_collection(
        batch, [](auto value) requires std::floating_point<decltype(value)> { return value + 1; });
    CHECK(std::get<0>(out) == 2.5);
    CHECK(std::get<1>(out) == 2);
    CHECK(std::get<2>(out)[0] == 2.f);
  }

  TEST_CASE("apply_to_collection: void and in-place functions work on copies the result keeps") {
    const std::vector<torch::Tensor> batch{torch::ones({2}), torch::ones({2})};
    int seen = 0;
    const auto same = volt::apply_to_collection(batch, [&](const torch::Tensor&) { ++seen; });
    CHECK(seen == 2);
    CHECK(same[0].unsafeGetTensorImpl() == batch[0].unsafeGetTensorImpl());

    std::vector<int> numbers{1, 2, 3};
    const auto incremented = volt::apply_to_collection(numbers, [](int& value) { ++value; });
    CHECK((incremented == std::vector<int>{2, 3, 4}));
    CHECK((numbers == std::vector<int>{1, 2, 3}));
  }

  TEST_CASE("apply_to_collection: rvalues are moved from: containers and tensors are reused") {
    std::vector<torch::Tensor> vector{torch::ones({2}, torch::kLong), torch::ones({2}, torch::kLong)};
    const auto* elements = vector.data();
    const auto* impl = vector[1].unsafeGetTensorImpl();
    const auto out = volt::apply_to_collection(std::move(vector), cast_to_double);
    CHECK(out.data() == elements);
    CHECK(out[1].unsafeGetTensorImpl() == impl);  // an integer tensor comes back as the same tensor
    CHECK(vector.empty());                         // NOLINT(bugprone-use-after-move)

    std::unordered_map<std::string, std::vector<torch::Tensor>> map{{"k", {torch::ones({1})}}};
    const auto* inner = map.at("k").data();
    const auto moved_map = volt::apply_to_collection(std::move(map), cast_to_double);
    CHECK(moved_map.at("k").data() == inner);
    CHECK(is_double(moved_map.at("k")[0]));

    std::optional<Pair> optional = Pair{torch::ones({1}), std::string(64, 'n')};
    const char* text = optional->name.data();
    const auto moved_optional = volt::apply_to_collection(std::move(optional), cast_to_double);
    CHECK(moved_optional->name.data() == text);
  }

  TEST_CASE("apply_to_collection: aggregates with const and reference members") {
    const WithConstField with_const{torch::ones({1}), 3};
    const auto out = volt::apply_to_collection(with_const, cast_to_double);
    CHECK(is_double(out.tensor));
    CHECK(out.number == 3);
    const std::vector<WithConstField> many{with_const, with_const};  // elements that cannot be assigned
    CHECK(is_double(volt::apply_to_collection(many, cast_to_double)[1].tensor));

    const torch::Tensor outside = torch::ones({1});
    const WithConstReference with_reference{outside, torch::ones({1})};
    const auto rebuilt = volt::apply_to_collection(with_reference, cast_to_double);
    CHECK(&rebuilt.referenced == &outside);  // reference members are kept, not rebuilt
    CHECK(is_double(rebuilt.owned));

    static_assert(!volt::reflect::reflectable<WithReference>);  // passed through as is
    torch::Tensor target = torch::ones({1});
    const WithReference opaque{target};
    CHECK(&volt::apply_to_collection(opaque, cast_to_double).referenced == &target);
  }

  TEST_CASE("apply_to_collection: c10 containers") {
    c10::List<torch::Tensor> list({torch::ones({1}), torch::ones({1})});
    const auto out = volt::apply_to_collection(list, cast_to_double);
    CHECK(is_double(out.get(1)));
    CHECK_FALSE(is_double(list.get(1)));
    c10::Dict<int64_t, torch::Tensor> dict;
    dict.insert(1, torch::ones({1}));
    CHECK(is_double(volt::apply_to_collection(dict, cast_to_double).at(1)));
    CHECK_FALSE(is_double(dict.at(1)));
  }
}

TEST_SUITE("reflect") {
  TEST_CASE("reflect: field counts up to the limit, and types as forwarded") {
    static_assert(volt::reflect::max_fields == 32);
    static_assert(volt::reflect::field_count<Pair> == 2);
    static_assert(volt::reflect::field_count<Sixteen> == 16);
    static_assert(volt::reflect::field_count<ThirtyTwo> == 32);
    static_assert(volt::reflect::field_count<Empty> == 0);
    static_assert(std::is_same_v<volt::reflect::field_types<WithConstReference>,
                                 volt::reflect::type_list<const torch::Tensor&, torch::Tensor>>);
    static_assert(std::is_same_v<volt::reflect::field_types<WithConstField>,
                                 volt::reflect::type_list<const torch::Tensor, int>>);
    static_assert(!volt::reflect::reflectable<std::string>);
    static_assert(!volt::reflect::reflectable<int>);

    ThirtyTwo big{};
    big.f30 = 30;
    big.last = torch::ones({1});
    const int sum = volt::reflect::with_fields(big, [](const auto&... fields) {
      int total = 0;
      ((total += [&] {
         if constexpr (std::is_same_v<std::decay_t<decltype(fields)>, int>) return fields;
         return 0;
       }()),
       ...);
      return total;
    });
    CHECK(sum == 30);
    const auto doubled = volt::apply_to_collection(big, cast_to_double);
    CHECK(is_double(doubled.last));
    CHECK(doubled.f30 == 30);

    Sixteen sixteen{};
    sixteen.f15 = torch::ones({1});
    CHECK(is_double(volt::apply_to_collection(std::move(sixteen), cast_to_double).f15));
  }
}

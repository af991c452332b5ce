#include "test_common.hpp"

#include <volt/core/apply.hpp>

#include <deque>
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

}  // namespace

TEST_CASE("apply_to_collection: smoke") {
  auto to_double = [](const torch::Tensor& t) { return t.is_floating_point() ? t.to(torch::kDouble) : t; };
  std::tuple<std::vector<torch::Tensor>, std::map<std::string, torch::Tensor>, Pair, double, std::optional<torch::Tensor>>
      batch{{torch::ones({2}), torch::ones({2}, torch::kLong)}, {{"a", torch::ones({1})}}, {torch::ones({3}), "p"}, 1.5,
            torch::ones({1})};
  auto out = volt::apply_to_collection(batch, to_double);
  CHECK((std::get<0>(out)[0].scalar_type() == torch::kDouble));
  CHECK((std::get<0>(out)[1].scalar_type() == torch::kLong));
  CHECK((std::get<1>(out).at("a").scalar_type() == torch::kDouble));
  CHECK((std::get<2>(out).first.scalar_type() == torch::kDouble));
  CHECK(std::get<2>(out).name == "p");
  CHECK(std::get<3>(out) == 1.5);
  CHECK((std::get<4>(out)->scalar_type() == torch::kDouble));
  CHECK((std::get<0>(batch)[0].scalar_type() == torch::kFloat));
}

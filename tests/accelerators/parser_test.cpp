#include "test_common.hpp"

#include "accelerators/scoped_env.hpp"

#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

// Lightning's `_parse_gpu_ids` through volt::CUDA and volt::MPS on faked machines (spec 1.2), and the CPU
// parser (spec 1.5). Every expected outcome is written out, and errors are checked by type and full text.

namespace {

using volt::testing::ScopedMachine;

using volt_test::ScopedEnv;

std::string list(const std::vector<int>& ids) { return volt::detail::python_list_repr(ids); }
std::string range(int n) {
  std::vector<int> ids;
  for (int i = 0; i < n; ++i) ids.push_back(i);
  return list(ids);
}

/// The outcome of a parse as the spec's table writes it: "[0, 1]", "None", or the error's full text
/// prefixed with its type ("MC: ..." for volt::MisconfigurationError, "VE: ..." for std::invalid_argument).
template <class Parse>
std::string outcome(Parse&& parse) {
  try {
    const std::optional<std::vector<int>> ids = parse();
    return ids ? list(*ids) : "None";
  } catch (const volt::MisconfigurationError& error) {
    return std::string("MC: ") + error.what();
  } catch (const std::invalid_argument& error) {
    return std::string("VE: ") + error.what();
  }
}

const std::string NA = "MC: GPUs requested but none are available.";
const std::string UQ = "MC: Device ID's (GPU) must be unique.";
std::string RQ(const std::string& requested, const std::string& available) {
  return "MC: You requested gpu: " + requested + "\n But your machine only has: " + available;
}

enum Column { cuda16, cuda2, cuda1, cuda0, mps1, mps0 };

std::string parse_on(Column column, const volt::DeviceSpec& spec) {
  switch (column) {
    case cuda16: {
      ScopedMachine machine{{.cuda_device_count = 16}};
      return outcome([&] { return volt::CUDA::parse_devices(spec); });
    }
    case cuda2: {
      ScopedMachine machine{{.cuda_device_count = 2}};
      return outcome([&] { return volt::CUDA::parse_devices(spec); });
    }
    case cuda1: {
      ScopedMachine machine{{.cuda_device_count = 1}};
      return outcome([&] { return volt::CUDA::parse_devices(spec); });
    }
    case cuda0: {
      ScopedMachine machine{{.cuda_device_count = 0}};
      return outcome([&] { return volt::CUDA::parse_devices(spec); });
    }
    case mps1: {
      ScopedMachine machine{{.torch_mps_available = true, .processor = "arm64"}};
      return outcome([&] { return volt::MPS::parse_devices(spec); });
    }
    case mps0: {
      ScopedMachine machine{{.torch_mps_available = false, .processor = "arm64"}};
      return outcome([&] { return volt::MPS::parse_devices(spec); });
    }
  }
  return "unreachable";
}

struct Row {
  const char* name;
  volt::DeviceSpec spec;
  std::vector<std::string> expected;  // CUDA16, CUDA2, CUDA1, CUDA0, MPS1, MPS0
};

void check_rows(const std::vector<Row>& rows) {
  ScopedEnv no_torchelastic("TORCHELASTIC_RUN_ID", nullptr);
  ScopedEnv no_disable("DISABLE_MPS", nullptr);
  const char* column_names[] = {"CUDA16", "CUDA2", "CUDA1", "CUDA0", "MPS1", "MPS0"};
  for (const Row& row : rows) {
    REQUIRE(row.expected.size() == 6);
    for (int column = 0; column < 6; ++column) {
      CAPTURE(row.name);
      CAPTURE(column_names[column]);
      CHECK(parse_on(static_cast<Column>(column), row.spec) == row.expected[column]);
    }
  }
}

}  // namespace

TEST_CASE("P-table: ints") {
  const std::string none = "None";
  check_rows({
      {"P2 0", 0, {none, none, none, none, none, none}},
      {"P3 1", 1, {"[0]", "[0]", "[0]", RQ("[0]", "[]"), "[0]", RQ("[0]", "[]")}},
      {"P4 2", 2, {"[0, 1]", "[0, 1]", RQ("[0, 1]", "[0]"), RQ("[0, 1]", "[]"), RQ("[0, 1]", "[0]"), RQ("[0, 1]", "[]")}},
      {"P5 3",
       3,
       {"[0, 1, 2]", RQ("[0, 1, 2]", "[0, 1]"), RQ("[0, 1, 2]", "[0]"), RQ("[0, 1, 2]", "[]"), RQ("[0, 1, 2]", "[0]"),
        RQ("[0, 1, 2]", "[]")}},
      {"P6 -1", -1, {range(16), "[0, 1]", "[0]", NA, "[0]", NA}},
      {"P7 -2", -2, {NA, NA, NA, NA, NA, NA}},
      {"-7", -7, {NA, NA, NA, NA, NA, NA}},
      {"16", 16, {range(16), RQ(range(16), "[0, 1]"), RQ(range(16), "[0]"), RQ(range(16), "[]"), RQ(range(16), "[0]"),
                  RQ(range(16), "[]")}},
      {"17", 17, {RQ(range(17), range(16)), RQ(range(17), "[0, 1]"), RQ(range(17), "[0]"), RQ(range(17), "[]"),
                  RQ(range(17), "[0]"), RQ(range(17), "[]")}},
  });
}

TEST_CASE("P-table: strings") {
  const std::string none = "None";
  check_rows({
      {"P8 '0'", "0", {none, none, none, none, none, none}},
      {"' 0 '", " 0 ", {none, none, none, none, none, none}},
      {"'[]'", "[]", {none, none, none, none, none, none}},
      {"P9 '1'", "1", {"[0]", "[0]", "[0]", RQ("[0]", "[]"), "[0]", RQ("[0]", "[]")}},
      {"P10 '2'", "2", {"[0, 1]", "[0, 1]", RQ("[0, 1]", "[0]"), RQ("[0, 1]", "[]"), RQ("[0, 1]", "[0]"), RQ("[0, 1]", "[]")}},
      {"P11 '3'",
       "3",
       {"[0, 1, 2]", RQ("[0, 1, 2]", "[0, 1]"), RQ("[0, 1, 2]", "[0]"), RQ("[0, 1, 2]", "[]"), RQ("[0, 1, 2]", "[0]"),
        RQ("[0, 1, 2]", "[]")}},
      {"P12 '-1'", "-1", {range(16), "[0, 1]", "[0]", NA, "[0]", NA}},
      {"' -1 '", " -1 ", {range(16), "[0, 1]", "[0]", NA, "[0]", NA}},
      {"'-01'", "-01", {range(16), "[0, 1]", "[0]", NA, "[0]", NA}},
      {"'-2'", "-2", {NA, NA, NA, NA, NA, NA}},
      {"'00' (not the short-circuit: int('00') is 0)", "00", {NA, NA, NA, NA, NA, NA}},
      {"'+0'", "+0", {NA, NA, NA, NA, NA, NA}},
      {"'+2'", "+2", {"[0, 1]", "[0, 1]", RQ("[0, 1]", "[0]"), RQ("[0, 1]", "[]"), RQ("[0, 1]", "[0]"), RQ("[0, 1]", "[]")}},
      {"'1_0'", "1_0", {range(10), RQ(range(10), "[0, 1]"), RQ(range(10), "[0]"), RQ(range(10), "[]"),
                        RQ(range(10), "[0]"), RQ(range(10), "[]")}},
      {"P15 '0,'", "0,", {"[0]", "[0]", "[0]", RQ("[0]", "[]"), "[0]", RQ("[0]", "[]")}},
      {"P16 '2,'", "2,", {"[2]", RQ("[2]", "[0, 1]"), RQ("[2]", "[0]"), RQ("[2]", "[]"), RQ("[2]", "[0]"), RQ("[2]", "[]")}},
      {"P18 '1, 3'",
       "1, 3",
       {"[1, 3]", RQ("[1, 3]", "[0, 1]"), RQ("[1, 3]", "[0]"), RQ("[1, 3]", "[]"), RQ("[1, 3]", "[0]"), RQ("[1, 3]", "[]")}},
      {"P20 ',1'", ",1", {"[1]", "[1]", RQ("[1]", "[0]"), RQ("[1]", "[]"), RQ("[1]", "[0]"), RQ("[1]", "[]")}},
      {"P21 '1,,3'",
       "1,,3",
       {"[1, 3]", RQ("[1, 3]", "[0, 1]"), RQ("[1, 3]", "[0]"), RQ("[1, 3]", "[]"), RQ("[1, 3]", "[0]"), RQ("[1, 3]", "[]")}},
      {"'3,1' keeps the order",
       "3,1",
       {"[3, 1]", RQ("[3, 1]", "[0, 1]"), RQ("[3, 1]", "[0]"), RQ("[3, 1]", "[]"), RQ("[3, 1]", "[0]"), RQ("[3, 1]", "[]")}},
      {"',' (an empty list)", ",", {NA, NA, NA, NA, NA, NA}},
      {"'0,0'", "0,0", {UQ, UQ, UQ, UQ, UQ, UQ}},
      {"'-1,' (an id, not all)",
       "-1,",
       {RQ("[-1]", range(16)), RQ("[-1]", "[0, 1]"), RQ("[-1]", "[0]"), RQ("[-1]", "[]"), RQ("[-1]", "[0]"), RQ("[-1]", "[]")}},
      {"'0, -1'",
       "0, -1",
       {RQ("[0, -1]", range(16)), RQ("[0, -1]", "[0, 1]"), RQ("[0, -1]", "[0]"), RQ("[0, -1]", "[]"), RQ("[0, -1]", "[0]"),
        RQ("[0, -1]", "[]")}},
  });
}

TEST_CASE("P-table: lists") {
  const std::string none = "None";
  check_rows({
      {"P29 []", volt::devices({}), {none, none, none, none, none, none}},
      {"P30 [0]", volt::devices({0}), {"[0]", "[0]", "[0]", RQ("[0]", "[]"), "[0]", RQ("[0]", "[]")}},
      {"[1]", volt::devices({1}), {"[1]", "[1]", RQ("[1]", "[0]"), RQ("[1]", "[]"), RQ("[1]", "[0]"), RQ("[1]", "[]")}},
      {"P32/P33 [1, 3]",
       volt::devices({1, 3}),
       {"[1, 3]", RQ("[1, 3]", "[0, 1]"), RQ("[1, 3]", "[0]"), RQ("[1, 3]", "[]"), RQ("[1, 3]", "[0]"), RQ("[1, 3]", "[]")}},
      {"[15, 0]", volt::devices({15, 0}), {"[15, 0]", RQ("[15, 0]", "[0, 1]"), RQ("[15, 0]", "[0]"), RQ("[15, 0]", "[]"),
                                           RQ("[15, 0]", "[0]"), RQ("[15, 0]", "[]")}},
      {"[0, 0]: uniqueness before availability", volt::devices({0, 0}), {UQ, UQ, UQ, UQ, UQ, UQ}},
      {"[5, 5]", volt::devices({5, 5}), {UQ, UQ, UQ, UQ, UQ, UQ}},
      {"[-1] is an id (P34)",
       volt::devices({-1}),
       {RQ("[-1]", range(16)), RQ("[-1]", "[0, 1]"), RQ("[-1]", "[0]"), RQ("[-1]", "[]"), RQ("[-1]", "[0]"), RQ("[-1]", "[]")}},
      {"[16]", volt::devices({16}), {RQ("[16]", range(16)), RQ("[16]", "[0, 1]"), RQ("[16]", "[0]"), RQ("[16]", "[]"),
                                     RQ("[16]", "[0]"), RQ("[16]", "[]")}},
  });
}

TEST_CASE("the GPU parsers refuse DeviceSpec{} ('auto') as Lightning's int() does") {
  ScopedMachine machine{{.cuda_device_count = 2}};
  CHECK_THROWS_WITH_AS(volt::CUDA::parse_devices(volt::DeviceSpec{}),
                       doctest::Contains("invalid literal for int() with base 10: 'auto'"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(volt::MPS::parse_devices(volt::DeviceSpec{}),
                       doctest::Contains("invalid literal for int() with base 10: 'auto'"), std::invalid_argument);
}

TEST_CASE("counts beyond volt's limit throw instead of materialising millions of ids") {
  ScopedMachine machine{{.cuda_device_count = 2}};
  CHECK_THROWS_WITH_AS(volt::CUDA::parse_devices(volt::devices(100000000)),
                       "volt: devices=100000000 asks for more devices than volt supports (65536)", std::invalid_argument);
}

TEST_CASE("P48: the TorchElastic bypass") {
  ScopedEnv torchelastic("TORCHELASTIC_RUN_ID", "1");
  {
    ScopedMachine machine{{.cuda_device_count = 1}};
    auto parse = [](const volt::DeviceSpec& spec) { return outcome([&] { return volt::CUDA::parse_devices(spec); }); };
    CHECK(parse(volt::devices({0, 1, 2})) == "[0, 1, 2]");
    CHECK(parse(2) == "[0, 1]");
    CHECK(parse("0,") == "[0]");
    CHECK(parse(volt::devices({0, 2})) == "[0, 2]");
    CHECK(parse(volt::devices({0, 0})) == "[0, 0]");  // no uniqueness check
    CHECK(parse(-1) == "[0]");
    CHECK(parse(1) == "[0]");
    CHECK(parse(volt::devices({5})) == RQ("[5]", "[0]"));  // single ids are still checked
    CHECK(parse(0) == "None");
    CHECK(parse(-2) == NA);
  }
  {
    // Only with exactly one visible GPU.
    ScopedMachine machine{{.cuda_device_count = 2}};
    CHECK(outcome([] { return volt::CUDA::parse_devices(volt::devices({0, 0})); }) == UQ);
    CHECK(outcome([] { return volt::CUDA::parse_devices(3); }) == RQ("[0, 1, 2]", "[0, 1]"));
  }
  {
    // An empty value of the variable still counts as set (os.getenv(...) is not None).
    ScopedEnv empty("TORCHELASTIC_RUN_ID", "");
    ScopedMachine machine{{.cuda_device_count = 1}};
    CHECK(outcome([] { return volt::CUDA::parse_devices(2); }) == "[0, 1]");
  }
}

TEST_CASE("CPU parser (spec 1.5)") {
  const std::string type_error = "VE: `devices` selected with `CPUAccelerator` should be an int > 0.";
  auto parse = [](const volt::DeviceSpec& spec) { return outcome([&] { return volt::CPU::parse_devices(spec); }); };
  CHECK(parse(1) == "[0]");                  // C1
  CHECK(parse(2) == "[0, 1]");               // C2
  CHECK(parse("3") == "[0, 1, 2]");          // C3
  CHECK(parse(" 3 ") == "[0, 1, 2]");
  CHECK(parse("010") == range(10));
  CHECK(parse(0) == type_error);             // C5
  CHECK(parse("0") == type_error);
  CHECK(parse("00") == type_error);
  CHECK(parse(-1) == type_error);
  CHECK(parse("-1") == type_error);          // not "all cores"
  CHECK(parse(-3) == type_error);
  CHECK(parse(volt::devices({3})) == type_error);
  CHECK(parse(volt::devices({})) == type_error);
  CHECK(parse(volt::DeviceSpec{}) == type_error);  // "auto"
  CHECK(parse("+2") == type_error);
  CHECK(parse("1_0") == type_error);         // Python's isdigit() is false for "_"
  CHECK(parse("0,") == type_error);
  CHECK(parse("1, 2") == type_error);
  CHECK(parse("[]") == type_error);
  // int() strips fewer characters than str.strip(): "\x1c3" passes isdigit() but int("\x1c3") fails.
  CHECK(parse("\x1c" "3") == "VE: invalid literal for int() with base 10: '\\x1c3'");
  // "1.0", "abc" (C5) are refused when the DeviceSpec is made, whatever the accelerator.
  CHECK_THROWS_AS(volt::DeviceSpec{std::string_view("1.0")}, std::invalid_argument);
  CHECK_THROWS_AS(volt::DeviceSpec{std::string_view("abc")}, std::invalid_argument);
}

TEST_CASE("the parser functions with explicit available ids") {
  CHECK(volt::detail::parse_gpu_ids(volt::devices("1, 3"), {0, 1, 2, 3}, false) == std::vector<int>{1, 3});
  CHECK(volt::detail::parse_gpu_ids(-1, {4, 7}, false) == std::vector<int>{4, 7});
  CHECK_FALSE(volt::detail::parse_gpu_ids(0, {}, false).has_value());
  CHECK_THROWS_WITH_AS(volt::detail::parse_gpu_ids(volt::devices({7, 4}), {4}, false),
                       "You requested gpu: [7, 4]\n But your machine only has: [4]", volt::MisconfigurationError);
}

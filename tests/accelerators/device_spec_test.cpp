#include "test_common.hpp"


#include <array>
#include <stdexcept>
#include <string>
#include <type_traits>

// Constant specs are parsed during compilation.
static_assert(volt::devices("1, 3").ids().equals({1, 3}));
static_assert(volt::devices("0,").ids().equals({0}));                  // P15
static_assert(volt::devices("2,").ids().equals({2}));                  // P16
static_assert(volt::devices(",1").ids().equals({1}));                  // P20
static_assert(volt::devices("1,,3").ids().equals({1, 3}));             // P21: empty pieces dropped
static_assert(volt::devices(" 1 , 3 ").ids().equals({1, 3}));
static_assert(volt::devices("3,1").ids().equals({3, 1}));              // caller's order kept
static_assert(volt::devices("-1,").ids().equals({-1}));                // an id, not "all"
static_assert(volt::devices(",").request() == volt::DeviceRequest::ids && volt::devices(",").ids().empty());
static_assert(volt::devices("0").selects_none());                      // P8
static_assert(volt::devices(" 0 ").selects_none());
static_assert(volt::devices("[]").selects_none());
static_assert(volt::devices(" [] ").selects_none());
static_assert(volt::devices(0).selects_none());                        // P2
static_assert(volt::devices({}).selects_none());                       // P29
static_assert(volt::devices("00").request() == volt::DeviceRequest::count && volt::devices("00").count() == 0);
static_assert(volt::devices("-1").selects_all());                      // P12
static_assert(volt::devices(" -1").selects_all());
static_assert(volt::devices("-01").selects_all());
static_assert(volt::devices(-1).selects_all());                        // P6
static_assert(volt::devices(-2).count() == -2 && volt::devices(-2).ids().empty());  // P7
static_assert(volt::devices("3").count() == 3);                        // P11
static_assert(volt::devices("+2").count() == 2);
static_assert(volt::devices("1_0").count() == 10);
static_assert(volt::devices("010").count() == 10);
static_assert(volt::devices("\t2\n").count() == 2);
static_assert(volt::devices("\x1c" "2" "\x1f").count() == 2);          // str.strip() removes \x1c-\x1f
static_assert(volt::devices(2).ids().equals({0, 1}));
static_assert(volt::devices({1, 3}).ids().equals({1, 3}));             // P32
static_assert(volt::devices({1}).ids().equals({1}));                   // {1} is a list, not a count
static_assert(volt::DeviceSpec{1}.count() == 1);                       // ... and DeviceSpec{1} a count
static_assert(volt::DeviceSpec{}.is_auto());
static_assert(volt::DeviceSpec{"auto"}.is_auto());
static_assert(volt::devices("2").form() == volt::DeviceSpecForm::string);
static_assert(volt::devices(2).form() == volt::DeviceSpecForm::integer);
static_assert(volt::devices({2}).form() == volt::DeviceSpecForm::id_list);
static_assert(!volt::devices({0, 1}).ids().has_duplicates());
// A repeated id does not compile in constant evaluation (tests/compile_fail/accelerators_device_spec_duplicate_*);
// at run time the spec is made and the accelerator's parser refuses it with Lightning's message.
TEST_CASE("a device spec with a repeated id is made at run time and refused by the parsers") {
  const volt::DeviceSpec list = volt::devices({0, 0});
  CHECK(list.ids().has_duplicates());
  const volt::DeviceSpec text{std::string_view("3, 3")};
  CHECK(text.ids().has_duplicates());
  CHECK(text.ids().equals({3, 3}));
}
static_assert(volt::devices(std::int64_t{4}).count() == 4);
static_assert(volt::devices(4u).count() == 4);
static_assert(volt::devices("1, 3").known_device_count() == 2);
static_assert(!volt::devices(-1).known_device_count().has_value());
static_assert(volt::devices(-5).known_device_count() == 0);

// The types Lightning refuses with TypeError do not convert (compile-fail tests show the error).
static_assert(!std::is_constructible_v<volt::DeviceSpec, bool>);
static_assert(!std::is_constructible_v<volt::DeviceSpec, double>);
static_assert(!std::is_constructible_v<volt::DeviceSpec, float>);
static_assert(!std::is_constructible_v<volt::DeviceSpec, std::nullptr_t>);
static_assert(!std::is_constructible_v<volt::DeviceSpec, char>);
static_assert(std::is_convertible_v<int, volt::DeviceSpec>);
static_assert(std::is_convertible_v<const char*, volt::DeviceSpec>);
static_assert(std::is_trivially_copyable_v<volt::DeviceSpec>);

// A structural type: usable as a template argument, from an int, a string or a list.
template <volt::DeviceSpec Spec>
constexpr int id_count = Spec.ids().size();
static_assert(id_count<"0,1,2"> == 3);
static_assert(id_count<2> == 2);
static_assert(id_count<volt::devices({4, 5})> == 2);

namespace {

struct Options {
  volt::DeviceSpec devices;
};

std::string invalid_literal(const std::string& repr) {
  return "invalid literal for int() with base 10: " + repr + " (" + std::string(volt::detail::device_spec_grammar) +
         ")";
}

volt::DeviceSpec make_at_run_time(const std::string& text) { return volt::DeviceSpec{std::string_view(text)}; }

}  // namespace

TEST_CASE("DeviceSpec reads naturally in designated initializers") {
  Options count{.devices = 2};
  Options text{.devices = "0,2"};
  Options list{.devices = volt::devices({1, 3})};
  Options automatic{};
  CHECK(count.devices.count() == 2);
  CHECK(text.devices.ids().equals({0, 2}));
  CHECK(list.devices.ids().equals({1, 3}));
  CHECK(automatic.devices.is_auto());
}

TEST_CASE("a malformed string throws Python's int() message, then the accepted grammar") {
  CHECK_THROWS_WITH_AS(make_at_run_time("1.5"), invalid_literal("'1.5'").c_str(), std::invalid_argument);  // P26
  CHECK_THROWS_WITH_AS(make_at_run_time("abc"), invalid_literal("'abc'").c_str(), std::invalid_argument);
  CHECK_THROWS_WITH_AS(make_at_run_time(""), invalid_literal("''").c_str(), std::invalid_argument);          // P28
  CHECK_THROWS_WITH_AS(make_at_run_time("   "), invalid_literal("''").c_str(), std::invalid_argument);
  CHECK_THROWS_WITH_AS(make_at_run_time("[0]"), invalid_literal("'[0]'").c_str(), std::invalid_argument);    // P24
  CHECK_THROWS_WITH_AS(make_at_run_time(" 1.5 "), invalid_literal("'1.5'").c_str(), std::invalid_argument);  // stripped
  CHECK_THROWS_WITH_AS(make_at_run_time("1, ,3"), invalid_literal("''").c_str(), std::invalid_argument);
  CHECK_THROWS_WITH_AS(make_at_run_time("1,a b,3"), invalid_literal("'a b'").c_str(), std::invalid_argument);
  CHECK_THROWS_WITH_AS(make_at_run_time("0x1"), invalid_literal("'0x1'").c_str(), std::invalid_argument);
  CHECK_THROWS_WITH_AS(make_at_run_time("1e3"), invalid_literal("'1e3'").c_str(), std::invalid_argument);
  CHECK_THROWS_WITH_AS(make_at_run_time("+ 1"), invalid_literal("'+ 1'").c_str(), std::invalid_argument);
  CHECK_THROWS_WITH_AS(make_at_run_time("_1"), invalid_literal("'_1'").c_str(), std::invalid_argument);
  CHECK_THROWS_WITH_AS(make_at_run_time("1_"), invalid_literal("'1_'").c_str(), std::invalid_argument);
  CHECK_THROWS_WITH_AS(make_at_run_time("1__0"), invalid_literal("'1__0'").c_str(), std::invalid_argument);
  CHECK_THROWS_WITH_AS(make_at_run_time("--1"), invalid_literal("'--1'").c_str(), std::invalid_argument);
  CHECK_THROWS_WITH_AS(make_at_run_time("Auto"), invalid_literal("'Auto'").c_str(), std::invalid_argument);
  CHECK_THROWS_WITH_AS(make_at_run_time(" auto"), invalid_literal("'auto'").c_str(), std::invalid_argument);
  // Python's repr: quotes and escapes.
  CHECK_THROWS_WITH_AS(make_at_run_time("a'b"), invalid_literal("\"a'b\"").c_str(), std::invalid_argument);
  CHECK_THROWS_WITH_AS(make_at_run_time("a'\"b"), invalid_literal("'a\\'\"b'").c_str(), std::invalid_argument);
  CHECK_THROWS_WITH_AS(make_at_run_time("1\t2"), invalid_literal("'1\\t2'").c_str(), std::invalid_argument);
  CHECK_THROWS_WITH_AS(make_at_run_time(std::string("1\0", 2)), invalid_literal("'1\\x00'").c_str(),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(make_at_run_time("a\\b"), invalid_literal("'a\\\\b'").c_str(), std::invalid_argument);
  // The first bad piece is reported, as Python's list comprehension would.
  CHECK_THROWS_WITH_AS(make_at_run_time("1,x,y"), invalid_literal("'x'").c_str(), std::invalid_argument);
}

TEST_CASE("volt's own limits: int range and id capacity") {
  CHECK_THROWS_WITH_AS(make_at_run_time("99999999999"),
                       doctest::Contains("volt: the number '99999999999' in a device spec does not fit in an int"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(make_at_run_time("1,99999999999"), doctest::Contains("'99999999999'"), std::invalid_argument);
  // A grammar error later in the list wins over an earlier out-of-range number (Python raises only for it).
  CHECK_THROWS_WITH_AS(make_at_run_time("99999999999,x"), invalid_literal("'x'").c_str(), std::invalid_argument);
  CHECK(make_at_run_time("2147483647").count() == 2147483647);
  CHECK(make_at_run_time("-2147483648").count() == -2147483648);
  CHECK_THROWS_AS(make_at_run_time("2147483648"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(volt::DeviceSpec{std::int64_t{1} << 40}, "volt: the device count 1099511627776 does not fit in an int",
                       std::invalid_argument);

  std::string sixty_four;
  for (int id = 0; id < 64; ++id) sixty_four += std::to_string(id) + ",";
  CHECK(make_at_run_time(sixty_four).ids().size() == 64);
  CHECK_THROWS_WITH_AS(make_at_run_time(sixty_four + "64"), "volt: a device spec holds at most 64 device ids, got 65",
                       std::invalid_argument);
  std::vector<int> many(65, 0);
  CHECK_THROWS_WITH_AS(volt::DeviceSpec::from_ids(many), "volt: a device spec holds at most 64 device ids, got 65",
                       std::invalid_argument);
}

TEST_CASE("a null const char* is Lightning's devices=None") {
  const char* none = nullptr;
  CHECK_THROWS_WITH_AS(volt::DeviceSpec{none},
                       "Device IDs (GPU/TPU) must be an int, a string, a sequence of ints, but you passed None",
                       std::invalid_argument);
}

TEST_CASE("ids() refuses specs without a machine-independent id list") {
  CHECK_THROWS_AS(volt::DeviceSpec{}.ids(), std::logic_error);
  CHECK_THROWS_AS(volt::devices(-1).ids(), std::logic_error);
  CHECK_THROWS_AS(volt::devices(0).ids(), std::logic_error);
  CHECK_THROWS_AS(volt::devices(65).ids(), std::logic_error);
  CHECK(volt::devices(64).ids().size() == 64);
}

TEST_CASE("the CPU parser's view of a string") {
  CHECK(volt::devices("3").text_is_digits());
  CHECK(volt::devices(" 3 ").text_is_digits());
  CHECK_FALSE(volt::devices("+2").text_is_digits());
  CHECK_FALSE(volt::devices("1_0").text_is_digits());
  CHECK_FALSE(volt::devices("-1").text_is_digits());
  CHECK(volt::devices("\x1c" "3").cpu_int_rejects_text());
  CHECK_FALSE(volt::devices("\v3\f").cpu_int_rejects_text());
}

TEST_CASE("how a spec is shown in messages") {
  CHECK(volt::devices(0).python_repr() == "0");
  CHECK(volt::devices("0").python_repr() == "'0'");
  CHECK(volt::devices({}).python_repr() == "[]");
  CHECK(volt::devices({1, 3}).python_repr() == "[1, 3]");
  CHECK(volt::DeviceSpec{}.python_repr() == "'auto'");
  CHECK(volt::devices(0).cpp_expression() == "0");
  CHECK(volt::devices("0").cpp_expression() == "\"0\"");
  CHECK(volt::devices({}).cpp_expression() == "volt::devices({})");
  CHECK(volt::devices({0, 2}).cpp_expression() == "volt::devices({0, 2})");
  CHECK(volt::DeviceSpec{}.cpp_expression() == "volt::DeviceSpec{}");
  const std::string long_text(200, ' ');
  const volt::DeviceSpec long_spec = make_at_run_time(long_text + "0");
  CHECK(long_spec.selects_none());
  CHECK(long_spec.text_truncated());
  CHECK(long_spec.text().size() == static_cast<std::size_t>(volt::max_device_spec_text));
}

TEST_CASE("specs compare by value") {
  CHECK(volt::devices("0,2") == volt::devices("0,2"));
  CHECK_FALSE(volt::devices("0,2") == volt::devices({0, 2}));  // different forms
  CHECK(volt::devices(2) == volt::DeviceSpec{2});
}

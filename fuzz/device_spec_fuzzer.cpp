// libFuzzer target for volt's device-spec string parser (DeviceSpec's constructor from text) and the
// parsers that consume it (Lightning's _parse_gpu_ids and _parse_cpu_cores).
//
// Besides "no crash, no sanitizer report", every input is checked against a reference implementation
// written independently from the spec's prose (PEP 515's statement of int()'s grammar, std::string
// splitting), and successful parses must round-trip through a canonical string.
//
// Build and run: fuzz/run_device_spec_fuzzer.sh (clang with -fsanitize=fuzzer,address,undefined).
#include <volt/accelerators/device_parser.hpp>
#include <volt/accelerators/device_spec.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace {

[[noreturn]] void fail(const char* what, std::string_view input) {
  std::fprintf(stderr, "property violated: %s\ninput (%zu bytes):", what, input.size());
  for (unsigned char c : input) std::fprintf(stderr, " %02x", c);
  std::fprintf(stderr, "\n");
  std::abort();
}

// ---- Reference: Lightning's _normalize_parse_gpu_string_input, transcribed from the spec's prose. ----

enum class RefError { none, invalid_literal, out_of_range, too_many };

struct RefResult {
  RefError error = RefError::none;
  volt::DeviceRequest request = volt::DeviceRequest::automatic;
  long long count = 0;
  std::vector<long long> ids;
};

const std::string python_whitespace = std::string(" \t\n\v\f\r\x1c\x1d\x1e\x1f");

std::string reference_strip(const std::string& text) {
  const auto first = text.find_first_not_of(python_whitespace);
  if (first == std::string::npos) return "";
  const auto last = text.find_last_not_of(python_whitespace);
  return text.substr(first, last - first + 1);
}

/// Python's int(text) for stripped ASCII text; nullopt for an invalid literal. Values are clamped to
/// +-10^12 so that "outside int" is visible without overflow. The grammar is stated as PEP 515 states it:
/// after an optional sign, digits where an underscore may only sit between two digits.
std::optional<long long> reference_int(const std::string& text) {
  std::string body = text;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) body.erase(0, 1);
  if (body.empty() || body.front() == '_' || body.back() == '_' || body.find("__") != std::string::npos ||
      body.find_first_not_of("0123456789_") != std::string::npos) {
    return std::nullopt;
  }
  std::string digits;
  for (char c : text) {
    if (c != '_' && c != '+' && c != '-') digits += c;
  }
  const auto significant = digits.find_first_not_of('0');
  digits = significant == std::string::npos ? "0" : digits.substr(significant);
  long long value = digits.size() > 12 ? 1000000000000LL : std::stoll(digits);
  return text[0] == '-' ? -value : value;
}

bool outside_int(long long value) { return value > 2147483647LL || value < -2147483648LL; }

RefResult reference_parse(const std::string& text) {
  RefResult result;
  if (text == "auto") return result;
  const std::string stripped = reference_strip(text);
  if (stripped == "0" || stripped == "[]") {
    result.request = volt::DeviceRequest::none;
    return result;
  }
  if (text.find(',') != std::string::npos) {
    result.request = volt::DeviceRequest::ids;
    std::vector<std::string> pieces;
    std::string current;
    for (char c : text) {
      if (c == ',') {
        pieces.push_back(current);
        current.clear();
      } else {
        current += c;
      }
    }
    pieces.push_back(current);
    bool out_of_range = false;
    for (const std::string& piece : pieces) {
      if (piece.empty()) continue;
      const auto value = reference_int(reference_strip(piece));
      if (!value) {
        result.error = RefError::invalid_literal;
        return result;
      }
      out_of_range = out_of_range || outside_int(*value);
      result.ids.push_back(*value);
    }
    if (out_of_range) result.error = RefError::out_of_range;
    else if (result.ids.size() > static_cast<std::size_t>(volt::max_device_ids)) result.error = RefError::too_many;
    return result;
  }
  if (text == "-1") {
    result.request = volt::DeviceRequest::all;
    return result;
  }
  const auto value = reference_int(stripped);
  if (!value) {
    result.error = RefError::invalid_literal;
  } else if (outside_int(*value)) {
    result.error = RefError::out_of_range;
  } else if (*value == -1) {
    result.request = volt::DeviceRequest::all;
  } else {
    result.request = volt::DeviceRequest::count;
    result.count = *value;
  }
  return result;
}

RefError classify(const std::invalid_argument& error) {
  const std::string_view message = error.what();
  if (message.starts_with("invalid literal for int() with base 10: ")) return RefError::invalid_literal;
  if (message.starts_with("volt: the number ")) return RefError::out_of_range;
  if (message.starts_with("volt: a device spec holds at most ")) return RefError::too_many;
  return RefError::none;
}

void check_round_trip(const volt::DeviceSpec& spec, std::string_view input) {
  std::string canonical;
  if (spec.request() == volt::DeviceRequest::ids) {
    for (int id : spec.ids()) canonical += std::to_string(id) + ",";
    if (canonical.empty()) canonical = ",";
    const volt::DeviceSpec again{std::string_view(canonical)};
    if (!(again.ids() == spec.ids())) fail("id list does not round-trip", input);
  } else if (spec.request() == volt::DeviceRequest::count && spec.count() != 0) {
    canonical = std::to_string(spec.count());
    const volt::DeviceSpec again{std::string_view(canonical)};
    if (again.request() != volt::DeviceRequest::count || again.count() != spec.count()) fail("count does not round-trip", input);
  }
}

void check_parsers(const volt::DeviceSpec& spec, int available_count, bool torchelastic, std::string_view input) {
  // Counts in the thousands only cost time (a list of every id, a long message): the logic is the same.
  if (spec.request() == volt::DeviceRequest::count && spec.count() > 4096) return;
  std::vector<int> available;
  for (int id = 0; id < available_count; ++id) available.push_back(id);
  try {
    const auto ids = volt::detail::parse_gpu_ids(spec, available, torchelastic);
    if (ids) {
      if (ids->empty()) fail("parse_gpu_ids returned an empty list", input);
      const bool bypassed = torchelastic && ids->size() != 1 && available.size() == 1;
      if (!bypassed) {
        if (std::set<int>(ids->begin(), ids->end()).size() != ids->size()) fail("duplicate ids accepted", input);
        for (int id : *ids) {
          if (id < 0 || id >= available_count) fail("unavailable id accepted", input);
        }
      }
    } else if (!spec.selects_none()) {
      fail("nullopt for a spec that selects devices", input);
    }
  } catch (const volt::MisconfigurationError&) {
  } catch (const std::invalid_argument&) {
    if (!spec.is_auto() && !(spec.request() == volt::DeviceRequest::count && spec.count() > volt::max_device_count)) {
      fail("parse_gpu_ids threw invalid_argument for a parsed spec", input);
    }
  }
  try {
    const int cores = volt::detail::parse_cpu_cores(spec);
    if (cores <= 0 || !spec.text_is_digits()) fail("parse_cpu_cores accepted a non-count", input);
  } catch (const std::invalid_argument&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  // The first byte picks the machine; the rest is the spec text (NUL bytes included).
  const int available_count = data[0] % 17;
  const bool torchelastic = (data[0] & 0x80) != 0;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  const RefResult expected = reference_parse(text);

  std::optional<volt::DeviceSpec> spec;
  RefError actual_error = RefError::none;
  try {
    spec.emplace(std::string_view(text));
  } catch (const std::invalid_argument& error) {
    actual_error = classify(error);
    if (actual_error == RefError::none) fail("unexpected error message", text);
  }
  if (actual_error != expected.error) fail("error class differs from the reference", text);
  if (!spec) return 0;

  if (spec->request() != expected.request) fail("request differs from the reference", text);
  if (spec->request() == volt::DeviceRequest::count && spec->count() != expected.count) fail("count differs", text);
  if (spec->request() == volt::DeviceRequest::ids) {
    const volt::DeviceIds ids = spec->ids();
    if (!std::equal(ids.begin(), ids.end(), expected.ids.begin(), expected.ids.end())) fail("ids differ", text);
  }
  if (spec->text_is_digits()) {
    const std::string stripped = reference_strip(text);
    if (stripped.empty() || stripped.find_first_not_of("0123456789") != std::string::npos) fail("digits flag", text);
  }
  (void)spec->python_repr();
  (void)spec->cpp_expression();
  check_round_trip(*spec, text);
  check_parsers(*spec, available_count, torchelastic, text);
  return 0;
}

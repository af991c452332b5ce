/// \file
/// The values volt's command line accepts: the choices of `--accelerator`, `--strategy` and `--precision`,
/// Lightning's precision aliases (volt::cli::normalize_precision), the number parsing of the flags, and
/// volt::cli::UsageError for bad input. volt::cli::Parser (volt/cli/args.hpp) uses them.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/log.hpp>

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

namespace volt::cli {

/// Exit status of a program given bad command-line input (argparse's and LightningCLI's).
inline constexpr int usage_error_status = 2;

/// Bad command-line input: an unknown flag, a missing or malformed value, a choice this machine or this
/// build cannot run. volt::cli::run prints "<program>: error: <what()>" and returns usage_error_status.
class UsageError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// The accepted values of `--accelerator`, in the order the help lists them ("gpu": MPS, else CUDA).
inline constexpr std::string_view accelerator_choices[] = {"auto", "cpu", "cuda", "mps", "gpu"};
/// The accepted values of `--strategy` (matched after lower-casing), in the order the help lists them.
inline constexpr std::string_view strategy_choices[] = {"auto", "single_device", "ddp"};
/// The canonical values of `--precision`, in the order the help lists them (precision_aliases are accepted too).
inline constexpr std::string_view precision_choices[] = {"32-true", "64-true", "16-true", "bf16-true", "16-mixed",
                                                         "bf16-mixed"};
/// Lightning's historical spellings (spec 5.1) and what they mean.
inline constexpr std::pair<std::string_view, std::string_view> precision_aliases[] = {
    {"64", "64-true"}, {"32", "32-true"}, {"16", "16-mixed"}, {"bf16", "bf16-mixed"}};

namespace detail {

template <std::size_t N>
std::string join(const std::string_view (&items)[N], std::string_view separator = ", ") {
  std::string out;
  for (std::size_t i = 0; i < N; ++i) {
    if (i > 0) out += separator;
    out += items[i];
  }
  return out;
}

template <std::size_t N>
bool one_of(std::string_view value, const std::string_view (&items)[N]) {
  for (auto item : items) {
    if (item == value) return true;
  }
  return false;
}

VOLT_INLINE std::string quoted(std::string_view text);

/// `text` as a whole integer of type T (one optional sign, as Python's int()), else UsageError "argument <flag>:
/// expected <what>, got 'text'".
template <class T>
T parse_number(std::string_view flag, std::string_view text, std::string_view what) {
  T value{};
  const char* first = text.data();
  const char* last = first + text.size();
  // Python's int() takes one sign, '+' or '-'; std::from_chars takes '-' only, so '+' is skipped here, and
  // a '-' right after it ("+-3") must not then be read as a second sign.
  const bool signed_twice = text.size() > 1 && text[0] == '+' && text[1] == '-';
  if (!text.empty() && text.front() == '+') ++first;
  const auto [end, error] = std::from_chars(first, last, value);
  if (text.empty() || signed_twice || error != std::errc{} || end != last) {
    throw UsageError("argument " + std::string(flag) + ": expected " + std::string(what) + ", got " + quoted(text));
  }
  return value;
}

VOLT_INLINE double parse_real(std::string_view flag, std::string_view text);

}  // namespace detail

/// Lightning's precision normalisation (spec 5.1) for a command-line value: a canonical name is returned
/// as is; "64", "32", "16", "bf16" become "64-true", "32-true", "16-mixed", "bf16-mixed" ("16" and "bf16"
/// warn, as Lightning does). Throws UsageError with Lightning's message for anything else.
VOLT_INLINE std::string normalize_precision(std::string_view value);

}  // namespace volt::cli

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/cli/impl/values.ipp>
#endif

// libFuzzer target for volt's command-line parser (volt::cli::Parser in include/volt/cli/args.hpp, volt::cli::Args
// and the standard flags in include/volt/cli/flags.hpp). Built without volt/cli/config_file.hpp, so `--config` and
// `--print-config` are refused where they stand.
//
// Input: byte 0 picks the parser (which program flags are added, whether the defaults are changed, whether the
// first token names one more program flag, whether help() is checked), byte 1 picks the spelling of the
// round-trip command line, the rest is argv[1..] split at NUL bytes.
//
// Besides "no crash, no hang, no sanitizer report", every input is checked against a reference parser written
// here from the contract in args.hpp's comments (argparse's conventions: `--flag VALUE`, `--flag=VALUE`,
// `--help`/`-h` stop parsing, the last occurrence wins):
//   * parse() returns Args or throws volt::cli::UsageError, nothing else, and exactly when the reference
//     refuses the command line; an error message starts with "argument <flag>: " (or "unrecognized arguments:
//     <token>") and quotes the value it refuses;
//   * a parsed Args holds the reference's values (precision normalised, strategy lower-cased, numbers in
//     range, batch size and node count >= 1, a device spec that DeviceSpec accepts) and the program flags' values and
//     is_set(); get_int()/get_double() agree with a reference number grammar; Lightning's discouraged
//     precision aliases warn once per use;
//   * Parser::add_option/add_switch refuse exactly the names the contract refuses (reserved, taken, or with the
//     config key of a flag already added), with std::invalid_argument;
//   * the canonical command line rebuilt from a parsed Args parses to equal Args (round trip);
//   * help() names the program, every flag, every program flag's help text and the changed defaults.
// The device-spec grammar itself is checked against its own reference by device_spec_fuzzer.cpp; here
// DeviceSpec's constructor is the oracle for "a valid --devices value".
//
// Build and run: fuzz/run_cli_fuzzer.sh (clang >= 15 with -fsanitize=fuzzer,address,undefined, C++20, LibTorch).
#include <volt/cli/args.hpp>

#include <charconv>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

std::string_view current_input;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "property violated: %s\ninput (%zu bytes):", what.c_str(), current_input.size());
  for (unsigned char c : current_input) std::fprintf(stderr, " %02x", c);
  std::fprintf(stderr, "\n");
  std::abort();
}

void require(bool condition, const std::string& what) {
  if (!condition) fail(what);
}

bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }
std::string in_quotes(std::string_view text) { return "'" + std::string(text) + "'"; }

// ---- The parser's configuration, chosen by byte 0 ----

struct ProgramFlag {
  std::string name;
  bool takes_value;
  std::string default_value;
  std::string help;
};

constexpr unsigned add_data_dir = 1u << 0;      // option --data-dir, default "data"
constexpr unsigned add_learning_rate = 1u << 1; // option --lr, default "0.1"
constexpr unsigned add_progress_switch = 1u << 2;
constexpr unsigned add_hidden = 1u << 3;        // option --hidden, no default
constexpr unsigned change_defaults = 1u << 4;
constexpr unsigned custom_flag = 1u << 5;       // the first token names one more program flag
constexpr unsigned custom_is_switch = 1u << 6;
constexpr unsigned checks_help = 1u << 7;

/// The standard flags as the contract lists them (the file comment and help()).
const std::set<std::string, std::less<>> standard_names = {
    "--accelerator", "--devices",   "--num-nodes", "--strategy",  "--precision",  "--max-epochs",
    "--max-steps",   "--max-time",  "--batch-size", "--accumulate-grad-batches", "--default-root-dir",
    "--ckpt-path",   "--seed",      "--cuda-graphs", "--deterministic", "--benchmark",
    "--float32-matmul-precision",   "--overfit-batches", "--reload-dataloaders-every-n-epochs",
    "--config",      "--print-config", "--help",  "-h"};

/// A program flag's config-file key: the name without "--", '-' as '_'.
std::string config_key(const std::string& name) {
  std::string key = name.substr(2);
  for (char& c : key) {
    if (c == '-') c = '_';
  }
  return key;
}

/// The contract of add(): a name starts with "--", is more than "--", holds no '=' and is not taken.
bool reference_accepts_flag_name(const std::string& name, const std::vector<ProgramFlag>& taken) {
  if (name.size() < 3 || name.compare(0, 2, "--") != 0 || contains(name, "=")) return false;
  if (standard_names.count(name) != 0) return false;
  for (const auto& flag : taken) {
    if (flag.name == name || config_key(flag.name) == config_key(name)) return false;  // all in section "model"
  }
  return true;
}

// ---- Reference number grammar ----

/// A whole decimal integer: one optional sign ('+' or, if `allow_minus`, '-'), then one or more ASCII digits;
/// nullopt when the text is not one or does not fit in T. Accumulated digit by digit, without the library.
template <class T>
std::optional<T> reference_integer(std::string_view text, bool allow_minus) {
  bool negative = false;
  if (!text.empty() && (text.front() == '+' || (allow_minus && text.front() == '-'))) {
    negative = text.front() == '-';
    text.remove_prefix(1);
  }
  if (text.empty()) return std::nullopt;
  // Magnitudes up to 2^64 - 1 in an unsigned accumulator; 2^63 is the one magnitude only a negative int64 has.
  std::uint64_t magnitude = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (magnitude > (UINT64_MAX - digit) / 10) return std::nullopt;
    magnitude = magnitude * 10 + digit;
  }
  if constexpr (std::is_signed_v<T>) {
    constexpr auto max = static_cast<std::uint64_t>(INT64_MAX);
    if (magnitude > max + (negative ? 1 : 0)) return std::nullopt;
    if (negative) return magnitude == max + 1 ? INT64_MIN : -static_cast<std::int64_t>(magnitude);
    return static_cast<std::int64_t>(magnitude);
  } else {
    return magnitude;
  }
}

/// Whether get_double() must accept `text` and which value it must return: a decimal or special number
/// as std::from_chars reads it (an implementation independent of std::stod/strtod), after an optional '+'.
/// nullopt: no promise either way (not such a number, or a value outside the normal double range).
std::optional<double> reference_real(std::string_view text) {
  if (!text.empty() && text.front() == '+') {
    text.remove_prefix(1);
    if (!text.empty() && text.front() == '-') return std::nullopt;
  }
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  // strtod reports ERANGE for results near or below the smallest normal double; no promise there.
  if (std::isfinite(value) && value != 0 && std::fabs(value) < 1e-307) return std::nullopt;
  return value;
}

void check_get_number(const volt::cli::Args& args, const std::string& flag) {
  const std::string& text = args.get(flag);
  const auto expected_int = reference_integer<std::int64_t>(text, true);
  try {
    const std::int64_t value = args.get_int(flag);
    require(expected_int.has_value(), "get_int accepted a non-integer: " + text);
    require(value == *expected_int, "get_int gave a different value for " + text);
  } catch (const volt::cli::UsageError& error) {
    require(!expected_int, "get_int refused an integer: " + text);
    require(std::string_view(error.what()).starts_with("argument " + flag + ": ") &&
                contains(error.what(), in_quotes(text)),
            "get_int's message does not name the flag and the value");
  }
  const auto expected_real = reference_real(text);
  try {
    const double value = args.get_double(flag);
    if (expected_real) {
      require(std::isnan(*expected_real) ? std::isnan(value) : value == *expected_real,
              "get_double gave a different value for " + text);
    }
    // Whatever it accepts must be a number: some decimal digit, or inf/nan.
    require(text.find_first_of("0123456789iInN") != std::string::npos, "get_double accepted " + text);
  } catch (const volt::cli::UsageError& error) {
    require(!expected_real, "get_double refused a number: " + text);
    require(std::string_view(error.what()).starts_with("argument " + flag + ": ") &&
                contains(error.what(), in_quotes(text)),
            "get_double's message does not name the flag and the value");
  }
}

// ---- Reference parser ----

struct Expected {
  bool ok = true;
  // On success: the standard fields and the program flags.
  std::string accelerator, devices, strategy, precision, default_root_dir, ckpt_path;
  std::optional<std::int64_t> max_epochs;
  std::int64_t max_steps = 0, batch_size = 0, accumulate_grad_batches = 0;
  int num_nodes = 1;
  std::optional<std::uint64_t> seed;
  bool cuda_graphs = false;
  std::optional<std::int64_t> max_time_seconds;      // --max-time
  std::string deterministic, float32_matmul_precision;  // "" when unset
  std::optional<bool> benchmark;
  // --overfit-batches: a fraction (is_fraction) or a count.
  bool overfit_is_fraction = true;
  double overfit_fraction = 0.0;
  std::int64_t overfit_count = 0;
  std::int64_t reload_every = 0;
  // A float text outside the reference grammar ("0x1p-2", "1.5e0" spelt oddly): the parser may take it or not.
  bool overfit_unknown = false;
  bool help = false;
  std::map<std::string, std::string> values;
  std::set<std::string> given;
  // On failure: what the message must start with and hold.
  std::string message_prefix;
  std::vector<std::string> message_parts;
  // Uses of the discouraged precision aliases "16" and "bf16" before parsing stopped.
  int warnings = 0;
};

const std::vector<std::string> accelerators = {"auto", "cpu", "cuda", "mps", "gpu"};
const std::vector<std::string> strategies = {"auto", "single_device", "ddp"};
const std::vector<std::string> precisions = {"32-true", "64-true", "16-true", "bf16-true", "16-mixed", "bf16-mixed"};
const std::map<std::string, std::string> precision_aliases = {
    {"64", "64-true"}, {"32", "32-true"}, {"16", "16-mixed"}, {"bf16", "bf16-mixed"}};

const std::vector<std::string> deterministic_values = {"true", "false", "warn"};
const std::vector<std::string> benchmark_values = {"true", "false"};
const std::vector<std::string> matmul_precisions = {"highest", "high", "medium"};

/// Lightning's Timer duration: "DD:HH:MM:SS" (one or more digits of days, then exactly two digits for each of
/// hours, minutes and seconds), surrounding ASCII white space allowed, at most Python's longest timedelta
/// (999999999 days, 23:59:59).
struct ReferenceDuration {
  enum { valid, malformed, too_long } kind = malformed;
  std::int64_t seconds = 0;
};

ReferenceDuration reference_duration(std::string_view text) {
  const auto space = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  while (!text.empty() && space(text.front())) text.remove_prefix(1);
  while (!text.empty() && space(text.back())) text.remove_suffix(1);
  ReferenceDuration result;
  const auto colon = text.find(':');
  if (colon == 0 || colon == std::string_view::npos || text.size() - colon != 9) return result;
  // Days: any number of digits; more than 10^10 is too long whatever follows (leading zeros aside).
  std::uint64_t days = 0;
  bool huge = false;
  for (char c : text.substr(0, colon)) {
    if (!digit(c)) return result;
    if (days > 10'000'000'000ULL) {
      huge = true;
    } else {
      days = days * 10 + static_cast<std::uint64_t>(c - '0');
    }
  }
  std::int64_t rest = 0;  // hours * 3600 + minutes * 60 + seconds
  for (std::size_t part = 0; part < 3; ++part) {
    const std::size_t at = colon + 3 * part;
    if (text[at] != ':' || !digit(text[at + 1]) || !digit(text[at + 2])) return result;
    rest = rest * 60 + (text[at + 1] - '0') * 10 + (text[at + 2] - '0');
  }
  constexpr std::int64_t longest = 999999999LL * 86400 + 86399;
  const std::int64_t seconds = huge ? longest + 1 : static_cast<std::int64_t>(days) * 86400 + rest;
  result.kind = seconds > longest ? ReferenceDuration::too_long : ReferenceDuration::valid;
  result.seconds = seconds;
  return result;
}

bool listed(const std::vector<std::string>& list, const std::string& value) {
  for (const auto& item : list) {
    if (item == value) return true;
  }
  return false;
}

// The reference reports refusals by return value: exceptions are slow under the sanitizers.
bool refuse(Expected& expected, std::string prefix, std::vector<std::string> parts = {}) {
  expected.ok = false;
  expected.message_prefix = std::move(prefix);
  expected.message_parts = std::move(parts);
  return false;
}

/// Applies one standard flag's value to `expected`; false (with the expected message) when the contract refuses it.
bool reference_standard(Expected& expected, const std::string& flag, const std::string& value) {
  auto refused = [&] { return refuse(expected, "argument " + flag + ": ", {in_quotes(value)}); };
  if (flag == "--accelerator") {
    if (!listed(accelerators, value)) return refused();
    expected.accelerator = value;
  } else if (flag == "--devices") {
    if (value != "auto") {
      try {
        (void)volt::DeviceSpec{std::string_view(value)};
      } catch (const std::invalid_argument& error) {
        return refuse(expected, "argument --devices: ", {error.what()});
      }
    }
    expected.devices = value;
  } else if (flag == "--num-nodes") {
    // An int: a value outside int's range is not an integer to the parser.
    const auto number = reference_integer<std::int64_t>(value, true);
    if (!number || *number < INT_MIN || *number > INT_MAX) return refused();
    if (*number < 1) return refuse(expected, "argument --num-nodes: ", {"but got " + std::to_string(*number) + "."});
    expected.num_nodes = static_cast<int>(*number);
  } else if (flag == "--strategy") {
    std::string lowered = value;
    for (char& c : lowered) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + ('a' - 'A'));
    }
    if (!listed(strategies, lowered)) return refuse(expected, "argument --strategy: ", {in_quotes(lowered)});
    expected.strategy = lowered;
  } else if (flag == "--precision") {
    if (listed(precisions, value)) {
      expected.precision = value;
    } else if (const auto alias = precision_aliases.find(value); alias != precision_aliases.end()) {
      expected.precision = alias->second;
      if (value == "16" || value == "bf16") ++expected.warnings;
    } else {
      return refused();
    }
  } else if (flag == "--max-time") {
    const ReferenceDuration duration = reference_duration(value);
    if (duration.kind == ReferenceDuration::malformed) {
      return refuse(expected, "argument --max-time: ", {"is not a valid duration", "DD:HH:MM:SS"});
    }
    if (duration.kind == ReferenceDuration::too_long) {
      return refuse(expected, "argument --max-time: ", {"is too long", "999999999 days"});
    }
    expected.max_time_seconds = duration.seconds;
  } else if (flag == "--deterministic") {
    if (!listed(deterministic_values, value)) return refused();
    expected.deterministic = value;
  } else if (flag == "--benchmark") {
    if (!listed(benchmark_values, value)) return refused();
    expected.benchmark = value == "true";
  } else if (flag == "--float32-matmul-precision") {
    if (!listed(matmul_precisions, value)) return refused();
    expected.float32_matmul_precision = value;
  } else if (flag == "--overfit-batches") {
    // Lightning's _int_or_float_type: a '.' makes it a float, else an int; then [0.0, 1.0], a whole float
    // above 1 as a count, or an int >= 0.
    const auto invalid = [&] { return refuse(expected, "argument --overfit-batches: ", {"invalid value " + value}); };
    if (value.find('.') == std::string::npos) {
      const auto number = reference_integer<std::int64_t>(value, true);
      if (!number) return refused();
      if (*number < 0) return invalid();
      expected.overfit_is_fraction = false;
      expected.overfit_count = *number;
    } else {
      const auto number = reference_real(value);
      if (!number) {
        // No promise for texts outside the reference grammar except: no digit and no inf/nan is refused.
        if (value.find_first_of("0123456789iInN") == std::string::npos) return refused();
        expected.overfit_unknown = true;
        return true;
      }
      if (*number >= 0.0 && *number <= 1.0) {
        expected.overfit_is_fraction = true;
        expected.overfit_fraction = *number;
      } else if (*number > 1.0 && *number < 9.2e18 && *number == std::floor(*number)) {
        expected.overfit_is_fraction = false;
        expected.overfit_count = static_cast<std::int64_t>(*number);
      } else {
        return invalid();
      }
    }
  } else if (flag == "--reload-dataloaders-every-n-epochs") {
    const auto number = reference_integer<std::int64_t>(value, true);
    if (!number) return refused();
    if (*number < 0) return refuse(expected, "argument " + flag + ": ", {"should be an int >= 0, got " + value + "."});
    expected.reload_every = *number;
  } else if (flag == "--seed") {
    const auto number = reference_integer<std::uint64_t>(value, false);
    if (!number) return refused();
    expected.seed = *number;
  } else if (flag == "--default-root-dir") {
    expected.default_root_dir = value;
  } else if (flag == "--ckpt-path") {
    expected.ckpt_path = value;
  } else {
    const auto number = reference_integer<std::int64_t>(value, true);
    if (!number) return refused();
    if (flag == "--max-epochs") {
      expected.max_epochs = *number;
    } else if (flag == "--max-steps") {
      expected.max_steps = *number;
    } else if (flag == "--batch-size") {
      if (*number < 1) return refuse(expected, "argument --batch-size: ", {std::to_string(*number)});
      expected.batch_size = *number;
    } else if (flag == "--accumulate-grad-batches") {
      expected.accumulate_grad_batches = *number;
    }
  }
  return true;
}

Expected reference_parse(const volt::cli::Args& defaults, const std::vector<ProgramFlag>& flags,
                         const std::vector<std::string>& tokens) {
  Expected expected;
  expected.accelerator = defaults.accelerator;
  expected.devices = defaults.devices;
  expected.strategy = defaults.strategy;
  expected.precision = defaults.precision;
  expected.max_epochs = defaults.max_epochs;
  expected.max_steps = defaults.max_steps;
  expected.batch_size = defaults.batch_size;
  expected.accumulate_grad_batches = defaults.accumulate_grad_batches;
  expected.default_root_dir = defaults.default_root_dir;
  expected.ckpt_path = defaults.ckpt_path;
  expected.seed = defaults.seed;
  expected.num_nodes = defaults.num_nodes;
  expected.cuda_graphs = defaults.cuda_graphs;
  if (defaults.max_time) expected.max_time_seconds = static_cast<std::int64_t>(defaults.max_time->seconds());
  expected.deterministic = std::string(defaults.deterministic.name());
  expected.benchmark = defaults.benchmark;
  expected.float32_matmul_precision = std::string(defaults.float32_matmul_precision.name());
  expected.overfit_is_fraction = defaults.overfit_batches.is_fraction();
  if (expected.overfit_is_fraction) {
    expected.overfit_fraction = defaults.overfit_batches.fraction();
  } else {
    expected.overfit_count = defaults.overfit_batches.count();
  }
  expected.reload_every = defaults.reload_dataloaders_every_n_epochs;
  for (const auto& flag : flags) {
    if (flag.takes_value) expected.values[flag.name] = flag.default_value;
  }
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const std::string& token = tokens[i];
    if (token == "--help" || token == "-h") {
      expected.help = true;
      return expected;
    }
    std::string name = token;
    std::optional<std::string> attached;
    if (token.size() >= 2 && token[0] == '-' && token[1] == '-') {
      if (const auto equals = token.find('='); equals != std::string::npos) {
        name = token.substr(0, equals);
        attached = token.substr(equals + 1);
      }
    }
    auto take_value = [&]() -> std::optional<std::string> {
      if (attached) return attached;
      if (i + 1 == tokens.size()) {
        refuse(expected, "argument " + name + ": expected one argument");
        return std::nullopt;
      }
      return tokens[++i];
    };
    if (name == "--config" || name == "--print-config") {  // no config-file support in this program
      refuse(expected, "argument " + name + ": ", {"<volt/cli/config_file.hpp>"});
      return expected;
    }
    if (name == "--cuda-graphs") {  // the one standard switch
      if (attached) {
        refuse(expected, "argument " + name + ": ", {in_quotes(*attached)});
        return expected;
      }
      expected.cuda_graphs = true;
      continue;
    }
    if (standard_names.count(name) != 0 && name != "--help" && name != "-h") {
      const auto value = take_value();
      if (!value || !reference_standard(expected, name, *value)) return expected;
      continue;
    }
    const ProgramFlag* program_flag = nullptr;
    for (const auto& flag : flags) {
      if (flag.name == name) program_flag = &flag;
    }
    if (program_flag == nullptr) {
      refuse(expected, "unrecognized arguments: " + token);
      return expected;
    }
    if (program_flag->takes_value) {
      const auto value = take_value();
      if (!value) return expected;
      expected.values[name] = *value;
    } else if (attached) {
      refuse(expected, "argument " + name + ": ", {in_quotes(*attached)});
      return expected;
    }
    expected.given.insert(name);
  }
  return expected;
}

// ---- Comparisons ----

void check_args(const volt::cli::Args& args, const Expected& expected, const std::vector<ProgramFlag>& flags,
                const std::string& context) {
  require(args.accelerator == expected.accelerator, context + ": accelerator");
  require(args.devices == expected.devices, context + ": devices");
  require(args.strategy == expected.strategy, context + ": strategy");
  require(args.precision == expected.precision, context + ": precision");
  require(args.max_epochs == expected.max_epochs, context + ": max_epochs");
  require(args.max_steps == expected.max_steps, context + ": max_steps");
  require(args.batch_size == expected.batch_size && args.batch_size >= 1, context + ": batch_size");
  require(args.accumulate_grad_batches == expected.accumulate_grad_batches, context + ": accumulate_grad_batches");
  require(args.default_root_dir == expected.default_root_dir, context + ": default_root_dir");
  require(args.ckpt_path == expected.ckpt_path, context + ": ckpt_path");
  require(args.seed == expected.seed, context + ": seed");
  require(args.num_nodes == expected.num_nodes && args.num_nodes >= 1, context + ": num_nodes");
  require(args.cuda_graphs == expected.cuda_graphs, context + ": cuda_graphs");
  require(args.max_time.has_value() == expected.max_time_seconds.has_value() &&
              (!args.max_time || args.max_time->seconds() == static_cast<double>(*expected.max_time_seconds)),
          context + ": max_time");
  require(args.deterministic.name() == expected.deterministic, context + ": deterministic");
  require(args.benchmark == expected.benchmark, context + ": benchmark");
  require(args.float32_matmul_precision.name() == expected.float32_matmul_precision,
          context + ": float32_matmul_precision");
  if (!expected.overfit_unknown) {
    require(args.overfit_batches.is_fraction() == expected.overfit_is_fraction &&
                (expected.overfit_is_fraction ? args.overfit_batches.fraction() == expected.overfit_fraction
                                              : args.overfit_batches.count() == expected.overfit_count),
            context + ": overfit_batches");
  }
  require(!args.overfit_batches.is_fraction() ? args.overfit_batches.count() >= 0
                                              : args.overfit_batches.fraction() >= 0.0 &&
                                                    args.overfit_batches.fraction() <= 1.0,
          context + ": overfit_batches in range");
  require(args.reload_dataloaders_every_n_epochs == expected.reload_every && expected.reload_every >= 0,
          context + ": reload_dataloaders_every_n_epochs");
  require(args.help == expected.help && !args.print_config, context + ": help");
  // parse() leaves the fields volt::cli::run resolves at their defaults.
  const volt::cli::Args untouched;
  require(args.accelerator_kind == untouched.accelerator_kind && args.strategy_name == untouched.strategy_name &&
              args.device_ids == untouched.device_ids,
          context + ": resolved fields changed by parse()");
  for (const auto& flag : flags) {
    require(args.is_set(flag.name) == (expected.given.count(flag.name) != 0), context + ": is_set " + flag.name);
    if (flag.takes_value) {
      require(args.get(flag.name) == expected.values.at(flag.name), context + ": value of " + flag.name);
    } else {
      require(args.get_switch(flag.name) == args.is_set(flag.name), context + ": get_switch " + flag.name);
    }
  }
}

void check_trainer_options(const volt::cli::Args& args) {
  volt::DeviceSpec spec;
  try {
    spec = args.device_spec();
  } catch (const std::exception&) {
    fail("a parsed --devices value does not make a DeviceSpec: " + args.devices);
  }
  const volt::TrainerOptions options = args.trainer_options();
  require(options.devices == spec && options.max_epochs == args.max_epochs && options.max_steps == args.max_steps &&
              options.accumulate_grad_batches == args.accumulate_grad_batches && options.seed == args.seed &&
              options.default_root_dir == args.default_root_dir && options.num_nodes == args.num_nodes &&
              options.cuda_graphs == args.cuda_graphs &&
              options.max_time.has_value() == args.max_time.has_value() &&
              (!options.max_time || options.max_time->seconds() == args.max_time->seconds()) &&
              options.deterministic == args.deterministic && options.benchmark == args.benchmark &&
              options.float32_matmul_precision == args.float32_matmul_precision &&
              options.overfit_batches.to_string() == args.overfit_batches.to_string() &&
              options.overfit_batches.is_fraction() == args.overfit_batches.is_fraction() &&
              options.reload_dataloaders_every_n_epochs == args.reload_dataloaders_every_n_epochs,
          "trainer_options() does not carry the parsed values");
}

struct Argv {
  explicit Argv(const std::vector<std::string>& tokens) : storage(tokens) {
    storage.insert(storage.begin(), "prog");
    for (const auto& token : storage) pointers.push_back(token.c_str());
  }
  int argc() const { return static_cast<int>(pointers.size()); }
  const char* const* argv() const { return pointers.data(); }
  std::vector<std::string> storage;
  std::vector<const char*> pointers;
};

/// The command line that gives `args` from the library's defaults: every standard field spelt out, the program
/// flags that were given, "--help" last if it was seen. `spelling` picks `--flag=VALUE` or `--flag VALUE` per flag.
std::vector<std::string> canonical_command_line(const volt::cli::Args& args, const std::vector<ProgramFlag>& flags,
                                                unsigned spelling) {
  std::vector<std::string> line;
  unsigned bit = 0;
  auto add = [&](const std::string& flag, const std::string& value) {
    if ((spelling >> (bit++ % 8)) & 1u) {
      line.push_back(flag + "=" + value);
    } else {
      line.push_back(flag);
      line.push_back(value);
    }
  };
  add("--accelerator", args.accelerator);
  add("--devices", args.devices);
  add("--num-nodes", std::to_string(args.num_nodes));
  add("--strategy", args.strategy);
  add("--precision", args.precision);
  if (args.max_epochs) add("--max-epochs", std::to_string(*args.max_epochs));
  add("--max-steps", std::to_string(args.max_steps));
  add("--batch-size", std::to_string(args.batch_size));
  add("--accumulate-grad-batches", std::to_string(args.accumulate_grad_batches));
  add("--default-root-dir", args.default_root_dir);
  add("--ckpt-path", args.ckpt_path);
  if (args.seed) add("--seed", std::to_string(*args.seed));
  if (args.cuda_graphs) line.push_back("--cuda-graphs");
  if (args.max_time) {
    // DD:HH:MM:SS with the hours, minutes and seconds in range.
    const auto total = static_cast<std::int64_t>(args.max_time->seconds());
    const auto two = [](std::int64_t v) { return std::string(v < 10 ? "0" : "") + std::to_string(v); };
    add("--max-time", std::to_string(total / 86400) + ":" + two(total % 86400 / 3600) + ":" + two(total % 3600 / 60) +
                          ":" + two(total % 60));
  }
  if (args.deterministic.is_set()) add("--deterministic", std::string(args.deterministic.name()));
  if (args.benchmark) add("--benchmark", *args.benchmark ? "true" : "false");
  if (args.float32_matmul_precision.is_set()) {
    add("--float32-matmul-precision", std::string(args.float32_matmul_precision.name()));
  }
  // A fraction keeps a '.' (Python's repr: "0.25", "1e-05" gets ".0"-less forms, so spelt with %.17g + '.'
  // where needed), a count has none.
  if (args.overfit_batches.is_fraction()) {
    char text[64];
    std::snprintf(text, sizeof text, "%.17g", args.overfit_batches.fraction());
    std::string fraction = text;
    if (fraction.find('.') == std::string::npos) {
      const auto exponent = fraction.find('e');
      fraction.insert(exponent == std::string::npos ? fraction.size() : exponent, ".0");
    }
    add("--overfit-batches", fraction);
  } else {
    add("--overfit-batches", std::to_string(args.overfit_batches.count()));
  }
  add("--reload-dataloaders-every-n-epochs", std::to_string(args.reload_dataloaders_every_n_epochs));
  for (const auto& flag : flags) {
    if (!args.is_set(flag.name)) continue;
    if (flag.takes_value) {
      add(flag.name, args.get(flag.name));
    } else {
      line.push_back(flag.name);
    }
  }
  if (args.help) line.push_back((spelling & 0x80u) ? "-h" : "--help");
  return line;
}

void check_help(const volt::cli::Parser& parser, const std::vector<ProgramFlag>& flags, const std::string& description) {
  const std::string help = parser.help();
  require(help.starts_with("usage: prog [options]\n") && help.ends_with("\n"), "help(): usage line");
  if (!description.empty()) require(contains(help, "\n" + description + "\n"), "help(): description");
  for (const auto& name : standard_names) require(contains(help, name), "help(): no " + name);
  const volt::cli::Args& defaults = parser.defaults();
  for (const auto& shown : {defaults.accelerator, defaults.devices, defaults.strategy, defaults.precision,
                            std::to_string(defaults.num_nodes), std::to_string(defaults.max_steps),
                            std::to_string(defaults.batch_size), std::to_string(defaults.accumulate_grad_batches)}) {
    require(contains(help, "default " + shown), "help(): default " + shown);
  }
  if (defaults.max_epochs) require(contains(help, "default " + std::to_string(*defaults.max_epochs)), "help(): epochs");
  if (defaults.seed) require(contains(help, "default " + std::to_string(*defaults.seed)), "help(): seed");
  require(contains(help, defaults.cuda_graphs ? "on by default" : "off by default"), "help(): cuda graphs");
  if (flags.empty()) return;
  std::size_t position = help.find("\nprog options:\n");
  require(position != std::string::npos, "help(): program options heading");
  for (const auto& flag : flags) {
    // In the order they were added, each with its help text (and its default when it has one).
    const auto at = help.find("  " + flag.name, position);
    require(at != std::string::npos, "help(): program flag " + flag.name + " missing or out of order");
    require(contains(help.substr(at), flag.help), "help(): help text of " + flag.name);
    if (flag.takes_value && !flag.default_value.empty()) {
      require(contains(help.substr(at), "(default " + flag.default_value + ")"), "help(): default of " + flag.name);
    }
    position = at + 2 + flag.name.size();
  }
}

int warnings_seen = 0;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Count volt's warnings (the precision aliases) instead of printing millions of them.
  volt::log::set_sink([](volt::log::Level level, std::string_view) {
    if (level == volt::log::Level::warning) ++warnings_seen;
  });
  volt::log::set_global_rank(0);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  current_input = std::string_view(reinterpret_cast<const char*>(data), size);
  const unsigned config = data[0];
  const unsigned spelling = data[1];
  std::vector<std::string> tokens;
  if (size > 2) {
    tokens.emplace_back();
    for (std::size_t i = 2; i < size; ++i) {
      if (data[i] == 0) {
        tokens.emplace_back();
      } else {
        tokens.back() += static_cast<char>(data[i]);
      }
    }
  }

  // ---- The parser: program flags, defaults ----
  const std::string description = (config & checks_help) ? "Fuzzes the parser." : "";
  volt::cli::Parser parser("prog", description);
  std::vector<ProgramFlag> flags;
  auto add_flag = [&](ProgramFlag flag) {
    const bool valid = reference_accepts_flag_name(flag.name, flags);
    try {
      if (flag.takes_value) {
        parser.add_option(flag.name, "VALUE", flag.help, flag.default_value);
      } else {
        parser.add_switch(flag.name, flag.help);
      }
      require(valid, "add_option/add_switch accepted the name " + flag.name);
      flags.push_back(std::move(flag));
    } catch (const std::invalid_argument& error) {
      require(!valid, "add_option/add_switch refused the name " + flag.name + ": " + error.what());
      require(contains(error.what(), flag.name), "add_option/add_switch's message does not name the flag");
    }
  };
  if (config & add_data_dir) add_flag({"--data-dir", true, "data", "folder with the data"});
  if (config & add_learning_rate) add_flag({"--lr", true, "0.1", "learning rate"});
  if (config & add_progress_switch) add_flag({"--no-progress-bar", false, "", "print no progress bar"});
  if (config & add_hidden) add_flag({"--hidden", true, "", "hidden units"});
  if ((config & custom_flag) && !tokens.empty()) {
    const std::string name = tokens.front();
    tokens.erase(tokens.begin());
    add_flag({name, (config & custom_is_switch) == 0, (config & custom_is_switch) ? "" : "x", "the fuzzed flag"});
  }
  if (config & change_defaults) {
    volt::cli::Args& defaults = parser.defaults();
    defaults.accelerator = "cpu";
    defaults.devices = "0,";
    defaults.precision = "bf16-mixed";
    defaults.max_epochs = 5;
    defaults.max_steps = 100;
    defaults.batch_size = 64;
    defaults.accumulate_grad_batches = 2;
    defaults.default_root_dir = "runs";
    defaults.seed = 7;
    defaults.num_nodes = 2;
    defaults.cuda_graphs = true;
    defaults.max_time = volt::Duration("00:01:30:00");
    defaults.deterministic = volt::Deterministic::parse("warn");
    defaults.benchmark = true;
    defaults.float32_matmul_precision = volt::Float32MatmulPrecision::parse("high");
    defaults.overfit_batches = std::int64_t{3};
    defaults.reload_dataloaders_every_n_epochs = 2;
  }
  if (config & checks_help) check_help(parser, flags, description);

  // ---- Parse and compare with the reference ----
  const Expected expected = reference_parse(parser.defaults(), flags, tokens);
  const Argv argv(tokens);
  warnings_seen = 0;
  std::optional<volt::cli::Args> parsed;
  try {
    parsed = parser.parse(argv.argc(), argv.argv());
  } catch (const volt::cli::UsageError& error) {
    const std::string_view message = error.what();
    // A float text for --overfit-batches outside the reference grammar: refusing it is allowed too.
    if (expected.overfit_unknown && message.starts_with("argument --overfit-batches: ")) return 0;
    require(!expected.ok, "UsageError for a command line the contract accepts: " + std::string(message));
    require(!message.empty() && message.starts_with(expected.message_prefix),
            "UsageError message does not start with '" + expected.message_prefix + "': " + std::string(message));
    for (const auto& part : expected.message_parts) {
      require(contains(message, part), "UsageError message lacks '" + part + "': " + std::string(message));
    }
  } catch (const std::exception& error) {
    fail(std::string("parse() threw something other than UsageError: ") + error.what());
  }
  require(warnings_seen == expected.warnings, "warnings for the precision aliases");
  if (!parsed) return 0;
  require(expected.ok, "parse() accepted a command line the contract refuses");
  check_args(*parsed, expected, flags, "parse");
  check_trainer_options(*parsed);
  for (const auto& flag : flags) {
    if (flag.takes_value) check_get_number(*parsed, flag.name);
  }
  try {
    (void)parsed->get("--never=added");  // no flag name holds '='
    fail("get() of a flag never added returned a value");
  } catch (const std::out_of_range&) {
  }

  // ---- Round trip: the canonical command line, parsed with the library's defaults, gives the same Args ----
  volt::cli::Parser fresh("prog");
  for (const auto& flag : flags) {
    if (flag.takes_value) {
      fresh.add_option(flag.name, "VALUE", flag.help, flag.default_value);
    } else {
      fresh.add_switch(flag.name, flag.help);
    }
  }
  const std::vector<std::string> line = canonical_command_line(*parsed, flags, spelling);
  const Argv again_argv(line);
  try {
    const volt::cli::Args again = fresh.parse(again_argv.argc(), again_argv.argv());
    Expected same = expected;
    same.warnings = 0;
    same.overfit_unknown = true;  // checked below against the first parse
    require(again.overfit_batches.is_fraction() == parsed->overfit_batches.is_fraction() &&
                again.overfit_batches.to_string() == parsed->overfit_batches.to_string(),
            "round trip: overfit_batches");
    check_args(again, same, flags, "round trip");
  } catch (const std::exception& error) {
    fail(std::string("the canonical command line does not parse: ") + error.what());
  }
  return 0;
}

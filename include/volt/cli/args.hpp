/// \file
/// volt::cli::Args and volt::cli::Parser: Lightning's Trainer flags on the command line, plus a program's own.
///
/// The standard flags are `--accelerator`, `--devices`, `--num-nodes`, `--strategy`, `--precision`,
/// `--max-epochs`, ..., `--cuda-graphs`;
/// a program adds its own with add_option and add_switch.
///
/// ```
/// volt::cli::Parser parser("fashion_mnist", "Trains an MLP on Fashion-MNIST.");
/// parser.defaults().max_epochs = 5;
/// parser.add_option("--data-dir", "DIR", "folder with the IDX files");
/// parser.add_switch("--no-progress-bar", "print no progress bar");
/// return volt::cli::run(parser, argc, argv, [&]<class A, class S, class P>(volt::cli::Args& args) { ... });
/// ```
///
/// Parsing only checks the text (names, numbers, the device spec's grammar; the accepted values and the
/// number parsing are in volt/cli/values.hpp); volt::cli::run (dispatch.hpp) then checks it against the
/// machine and picks the policy types.
#pragma once

#include <volt/accelerators/accelerator.hpp>
#include <volt/accelerators/device_spec.hpp>
#include <volt/cli/values.hpp>
#include <volt/core/duration.hpp>
#include <volt/core/errors.hpp>
#include <volt/trainer/options.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace volt::cli {

/// The parsed command line. The standard fields hold what was given (precision normalised); the fields
/// under "resolved" are filled by volt::cli::run before it calls the program. A program's own flags are
/// read with get(), get_int(), get_double() and is_set().
struct Args {
  /// `--accelerator` as given: one of accelerator_choices.
  std::string accelerator = "auto";
  /// The device spec as typed ("auto", "1", "-1", "0,2", ...).
  std::string devices = "auto";
  /// `--num-nodes`: machines taking part in the run (Lightning's num_nodes), >= 1; more than 1 makes strategy
  /// auto pick ddp.
  int num_nodes = 1;
  /// `--strategy`, lower-cased: one of strategy_choices.
  std::string strategy = "auto";
  /// Lightning's canonical name ("32-true", "bf16-mixed", ...). volt::cli::run replaces "16-mixed" by
  /// "bf16-mixed" on the CPU (with Lightning's warning) before it calls the program.
  std::string precision = "32-true";
  /// `--max-epochs`; nullopt: TrainerOptions' default (1000 when max_steps is -1).
  std::optional<std::int64_t> max_epochs{};
  /// `--max-steps`; -1: no limit.
  std::int64_t max_steps = -1;
  /// `--max-time DD:HH:MM:SS`: TrainerOptions::max_time; nullopt: no time limit.
  std::optional<Duration> max_time{};
  /// The program's batch size (set its default with parser.defaults().batch_size).
  std::int64_t batch_size = 32;
  /// `--accumulate-grad-batches` (checked by the Trainer, not by the parser).
  std::int64_t accumulate_grad_batches = 1;
  /// `--default-root-dir`: where logs and checkpoints go; empty: the current folder.
  std::string default_root_dir{};
  /// A checkpoint to resume from (pass it to trainer.fit); empty: none.
  std::string ckpt_path{};
  /// `--seed`; nullopt: not seeded.
  std::optional<std::uint64_t> seed{};
  /// `--cuda-graphs` (a switch): TrainerOptions::cuda_graphs, one CUDA graph per training step where the run
  /// allows it (fit says why not and trains eagerly otherwise).
  bool cuda_graphs = false;
  /// `--deterministic {true,false,warn}`: TrainerOptions::deterministic; unset: LibTorch's setting.
  Deterministic deterministic{};
  /// `--benchmark {true,false}`: TrainerOptions::benchmark (cuDNN's benchmark mode); nullopt: Lightning's rule.
  std::optional<bool> benchmark{};
  /// `--float32-matmul-precision {highest,high,medium}`: TrainerOptions::float32_matmul_precision.
  Float32MatmulPrecision float32_matmul_precision{};
  /// Whether `--help` or `-h` was given (parsing stopped there; run() prints the help and returns 0).
  bool help = false;

  // ---- resolved by volt::cli::run ----
  /// The accelerator chosen ("auto" and "gpu" resolved on this machine).
  AcceleratorKind accelerator_kind = AcceleratorKind::cpu;
  /// The strategy chosen ("auto" resolved: "ddp" for more than one device, else "single_device").
  std::string strategy_name = "single_device";
  /// Lightning's trainer.device_ids for the devices selected.
  std::vector<int> device_ids{};

  /// The device spec: DeviceSpec{} for "auto", else the text. Throws std::invalid_argument for malformed
  /// text (Parser::parse has already refused it).
  DeviceSpec device_spec() const { return devices == "auto" ? DeviceSpec{} : DeviceSpec{std::string_view(devices)}; }

  /// TrainerOptions with devices, num_nodes, max_epochs, max_steps, max_time, accumulate_grad_batches,
  /// default_root_dir, seed, cuda_graphs and the math modes (deterministic, benchmark, float32_matmul_precision)
  /// from the command line; everything else at its default, for the program to adjust.
  TrainerOptions trainer_options() const {
    TrainerOptions options;
    options.devices = device_spec();
    options.num_nodes = num_nodes;
    options.max_epochs = max_epochs;
    options.max_steps = max_steps;
    options.max_time = max_time;
    options.accumulate_grad_batches = accumulate_grad_batches;
    options.default_root_dir = default_root_dir;
    options.seed = seed;
    options.cuda_graphs = cuda_graphs;
    options.deterministic = deterministic;
    options.benchmark = benchmark;
    options.float32_matmul_precision = float32_matmul_precision;
    return options;
  }

  /// Whether the program flag `flag` (e.g. "--data-dir") was given on the command line.
  bool is_set(std::string_view flag) const { return given_.count(std::string(flag)) != 0; }
  /// The value of the program option `flag` (its default when not given). Throws std::out_of_range for a
  /// flag the program did not add.
  const std::string& get(std::string_view flag) const {
    const auto found = values_.find(std::string(flag));
    if (found == values_.end()) throw std::out_of_range("volt::cli: no flag " + std::string(flag) + " was added");
    return found->second;
  }
  /// get(flag) as an integer; throws UsageError when it is not one.
  std::int64_t get_int(std::string_view flag) const {
    return detail::parse_number<std::int64_t>(flag, get(flag), "an integer");
  }
  /// get(flag) as a number; throws UsageError when it is not one.
  double get_double(std::string_view flag) const { return detail::parse_real(flag, get(flag)); }
  /// Whether the switch `flag` (a flag without value) was given.
  bool get_switch(std::string_view flag) const { return is_set(flag); }

 private:
  friend class Parser;
  std::map<std::string, std::string, std::less<>> values_;
  std::set<std::string, std::less<>> given_;
};

/// Parses Lightning's Trainer flags and a program's own flags; see the file comment. Not thread-safe.
class Parser {
 public:
  /// `program` names the program in the help and in error messages.
  explicit Parser(std::string program = "program", std::string description = {})
      : program_(std::move(program)), description_(std::move(description)) {}

  /// The values the standard flags take when not given; change them before parse()/run().
  Args& defaults() { return defaults_; }
  /// The values the standard flags take when not given.
  const Args& defaults() const { return defaults_; }
  /// The program's name, as given to the constructor.
  const std::string& program() const { return program_; }

  /// Adds an option taking a value (`--name VALUE` or `--name=VALUE`). Throws std::invalid_argument for a
  /// name that does not start with "--" or is already taken.
  Parser& add_option(std::string flag, std::string metavar, std::string help, std::string default_value = {}) {
    add(std::move(flag), std::move(metavar), std::move(help), std::move(default_value), true);
    return *this;
  }
  /// Adds a switch without a value (`--name`); read it with Args::get_switch.
  Parser& add_switch(std::string flag, std::string help) {
    add(std::move(flag), {}, std::move(help), {}, false);
    return *this;
  }

  /// Parses argv[1..argc-1]. Throws UsageError for an unknown flag, a missing value, an invalid choice, a
  /// malformed number or device spec. `--help`/`-h` sets Args::help and stops parsing.
  Args parse(int argc, const char* const* argv) const {
    Args args = defaults_;
    for (const auto& extra : extras_) {
      if (extra.takes_value) args.values_[extra.flag] = extra.default_value;
    }
    for (int i = 1; i < argc; ++i) {
      std::string token = argv[i];
      if (token == "--help" || token == "-h") {
        args.help = true;
        return args;
      }
      std::optional<std::string> inline_value;
      if (const auto equals = token.find('='); token.rfind("--", 0) == 0 && equals != std::string::npos) {
        inline_value = token.substr(equals + 1);
        token.resize(equals);
      }
      auto value = [&]() -> std::string {
        if (inline_value) return *inline_value;
        if (i + 1 >= argc) throw UsageError("argument " + token + ": expected one argument");
        return argv[++i];
      };
      if (token == "--cuda-graphs") {
        if (inline_value) {
          throw UsageError("argument " + token + ": ignored explicit argument " + detail::quoted(*inline_value));
        }
        args.cuda_graphs = true;
      } else if (!apply_standard(args, token, value)) {
        const Extra* extra = find_extra(token);
        if (extra == nullptr) {
          throw UsageError("unrecognized arguments: " + std::string(argv[i]) + " (see " + program_ + " --help)");
        }
        if (extra->takes_value) {
          args.values_[extra->flag] = value();
        } else if (inline_value) {
          throw UsageError("argument " + token + ": ignored explicit argument " + detail::quoted(*inline_value));
        }
        args.given_.insert(extra->flag);
      }
    }
    return args;
  }

  /// The usage text printed for --help.
  std::string help() const {
    std::ostringstream out;
    out << "usage: " << program_ << " [options]\n";
    if (!description_.empty()) out << '\n' << description_ << '\n';
    out << "\nTrainer options (Lightning's names):\n";
    auto line = [&](std::string left, const std::string& text) {
      if (left.size() < 34) left.resize(34, ' ');
      else left += "\n" + std::string(36, ' ');
      out << "  " << left << text << '\n';
    };
    line("--accelerator {" + detail::join(accelerator_choices, ",") + "}",
         "default " + defaults_.accelerator + " (auto: MPS, then CUDA, then CPU)");
    line("--devices SPEC", "default " + defaults_.devices + " (1, -1 for all, \"0,2\" for ids)");
    line("--num-nodes N", "default " + std::to_string(defaults_.num_nodes) +
                              " (machines in the run; more than 1: strategy auto is ddp)");
    line("--strategy {" + detail::join(strategy_choices, ",") + "}",
         "default " + defaults_.strategy + " (auto: ddp for more than one device or node)");
    line("--precision {" + detail::join(precision_choices, ",") + "}",
         "default " + defaults_.precision + "; aliases 64, 32, 16 (16-mixed), bf16 (bf16-mixed)");
    line("--max-epochs N", "default " + (defaults_.max_epochs ? std::to_string(*defaults_.max_epochs) : std::string("1000 when --max-steps is -1")));
    line("--max-steps N", "default " + std::to_string(defaults_.max_steps) + " (-1: no limit)");
    line("--max-time DD:HH:MM:SS", defaults_.max_time ? "default " + defaults_.max_time->to_string()
                                                      : std::string("stop fit after this training time (default: none)"));
    line("--batch-size N", "default " + std::to_string(defaults_.batch_size));
    line("--accumulate-grad-batches N", "default " + std::to_string(defaults_.accumulate_grad_batches));
    line("--default-root-dir DIR", "logs and checkpoints (default: the current folder)");
    line("--ckpt-path FILE", "checkpoint to resume from");
    line("--seed N", defaults_.seed ? "default " + std::to_string(*defaults_.seed) : std::string("default: not seeded"));
    line("--cuda-graphs", std::string(defaults_.cuda_graphs ? "on by default" : "off by default") +
                              "; each training step replayed as one CUDA graph (one CUDA device)");
    auto or_default = [](bool given, std::string_view value, std::string otherwise) {
      return "default: " + (given ? std::string(value) : std::move(otherwise));
    };
    line("--deterministic {true,false,warn}",
         or_default(defaults_.deterministic.is_set(), defaults_.deterministic.name(), "LibTorch's setting") +
             " (deterministic algorithms only; warn: a warning where there is none)");
    line("--benchmark {true,false}",
         or_default(defaults_.benchmark.has_value(), defaults_.benchmark.value_or(false) ? "true" : "false",
                    "off, or as --deterministic decides") +
             " (cuDNN times the convolution algorithms for each input shape)");
    line("--float32-matmul-precision {highest,high,medium}",
         or_default(defaults_.float32_matmul_precision.is_set(), defaults_.float32_matmul_precision.name(),
                    "LibTorch's setting (highest)") +
             "; high: TF32 tensor cores on CUDA GPUs that have them");
    line("-h, --help", "show this help and exit");
    if (!extras_.empty()) {
      out << "\n" << program_ << " options:\n";
      for (const auto& extra : extras_) {
        std::string text = extra.help;
        if (extra.takes_value && !extra.default_value.empty()) text += " (default " + extra.default_value + ")";
        line(extra.flag + (extra.takes_value ? " " + extra.metavar : std::string()), text);
      }
    }
    return out.str();
  }

 private:
  struct Extra {
    std::string flag, metavar, help, default_value;
    bool takes_value;
  };

  static bool is_standard(std::string_view flag) {
    constexpr std::string_view names[] = {"--accelerator", "--devices", "--num-nodes", "--strategy",
                                          "--precision", "--max-epochs", "--max-steps", "--max-time", "--batch-size",
                                          "--accumulate-grad-batches", "--default-root-dir", "--ckpt-path",
                                          "--seed", "--cuda-graphs", "--deterministic", "--benchmark",
                                          "--float32-matmul-precision", "--help", "-h"};
    return detail::one_of(flag, names);
  }

  void add(std::string flag, std::string metavar, std::string help, std::string default_value, bool takes_value) {
    if (flag.rfind("--", 0) != 0 || flag.size() < 3 || flag.find('=') != std::string::npos) {
      throw std::invalid_argument("volt::cli: a flag name starts with \"--\" and holds no '=', got \"" + flag + "\"");
    }
    if (is_standard(flag) || find_extra(flag) != nullptr) {
      throw std::invalid_argument("volt::cli: the flag " + flag + " is already defined");
    }
    extras_.push_back({std::move(flag), std::move(metavar), std::move(help), std::move(default_value), takes_value});
  }

  const Extra* find_extra(std::string_view flag) const {
    for (const auto& extra : extras_) {
      if (extra.flag == flag) return &extra;
    }
    return nullptr;
  }

  template <class Value>
  static bool apply_standard(Args& args, std::string_view flag, Value&& value) {
    using detail::parse_number;
    if (flag == "--accelerator") {
      // Lightning does not lower-case accelerator names (spec 3.1 a).
      args.accelerator = value();
      if (!detail::one_of(args.accelerator, accelerator_choices)) {
        throw UsageError("argument --accelerator: You selected an invalid accelerator name: `accelerator=" +
                         detail::quoted(args.accelerator) + "`. Available names are: " +
                         detail::join(accelerator_choices) + ".");
      }
    } else if (flag == "--devices") {
      args.devices = value();
      if (args.devices != "auto") {
        try {
          (void)DeviceSpec{std::string_view(args.devices)};
        } catch (const std::invalid_argument& error) {
          throw UsageError("argument --devices: " + std::string(error.what()) +
                           ". Valid: auto, a count (1, 2), -1 for every device, or ids such as \"0,2\" or \"1,\"");
        }
      }
    } else if (flag == "--num-nodes") {
      args.num_nodes = parse_number<int>(flag, value(), "an integer");
      if (args.num_nodes < 1) {
        throw UsageError("argument --num-nodes: `num_nodes` must be a positive integer, but got " +
                         std::to_string(args.num_nodes) + ".");
      }
    } else if (flag == "--strategy") {
      // Lightning lower-cases strategy names (spec 3.1 a).
      args.strategy = value();
      for (char& c : args.strategy) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
      if (!detail::one_of(args.strategy, strategy_choices)) {
        throw UsageError("argument --strategy: You selected an invalid strategy name: `strategy=" +
                         detail::quoted(args.strategy) + "`. Valid choices: " + detail::join(strategy_choices) + ".");
      }
    } else if (flag == "--precision") {
      args.precision = normalize_precision(value());
    } else if (flag == "--max-epochs") {
      args.max_epochs = parse_number<std::int64_t>(flag, value(), "an integer");
    } else if (flag == "--max-steps") {
      args.max_steps = parse_number<std::int64_t>(flag, value(), "an integer");
    } else if (flag == "--max-time") {
      try {
        args.max_time = Duration(value());
      } catch (const MisconfigurationError& error) {
        throw UsageError("argument --max-time: " + std::string(error.what()));
      }
    } else if (flag == "--batch-size") {
      args.batch_size = parse_number<std::int64_t>(flag, value(), "an integer");
      if (args.batch_size < 1) {
        throw UsageError("argument --batch-size: expected a positive integer, got " + std::to_string(args.batch_size));
      }
    } else if (flag == "--accumulate-grad-batches") {
      args.accumulate_grad_batches = parse_number<std::int64_t>(flag, value(), "an integer");
    } else if (flag == "--default-root-dir") {
      args.default_root_dir = value();
    } else if (flag == "--ckpt-path") {
      args.ckpt_path = value();
    } else if (flag == "--seed") {
      args.seed = parse_number<std::uint64_t>(flag, value(), "a non-negative integer");
    } else if (flag == "--deterministic") {
      const std::string text = value();
      if (text != "true" && text != "false" && text != "warn") {
        throw UsageError("argument --deterministic: expected true, false or warn, got " + detail::quoted(text));
      }
      args.deterministic = Deterministic::parse(text);
    } else if (flag == "--benchmark") {
      const std::string text = value();
      if (text != "true" && text != "false") {
        throw UsageError("argument --benchmark: expected true or false, got " + detail::quoted(text));
      }
      args.benchmark = text == "true";
    } else if (flag == "--float32-matmul-precision") {
      const std::string text = value();
      if (text != "highest" && text != "high" && text != "medium") {
        throw UsageError("argument --float32-matmul-precision: expected highest, high or medium, got " +
                         detail::quoted(text));
      }
      args.float32_matmul_precision = Float32MatmulPrecision::parse(text);
    } else {
      return false;
    }
    return true;
  }

  std::string program_;
  std::string description_;
  Args defaults_;
  std::vector<Extra> extras_;
};

}  // namespace volt::cli

/// \file
/// Definitions of the functions declared in volt/cli/args.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::cli {

VOLT_INLINE auto Args::trainer_options() const -> TrainerOptions {
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

VOLT_INLINE const std::string& Args::get(std::string_view flag) const {
  const auto found = values_.find(std::string(flag));
  if (found == values_.end()) throw std::out_of_range("volt::cli: no flag " + std::string(flag) + " was added");
  return found->second;
}

VOLT_INLINE std::int64_t Args::get_int(std::string_view flag) const {
  return detail::parse_number<std::int64_t>(flag, get(flag), "an integer");
}

VOLT_INLINE auto Parser::add_switch(std::string flag, std::string help) -> Parser& {
  add(std::move(flag), {}, std::move(help), {}, false);
  return *this;
}

VOLT_INLINE auto Parser::parse(int argc, const char* const* argv) const -> Args {
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

VOLT_INLINE std::string Parser::help() const {
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

VOLT_INLINE bool Parser::is_standard(std::string_view flag) {
  constexpr std::string_view names[] = {"--accelerator", "--devices", "--num-nodes", "--strategy",
                                        "--precision", "--max-epochs", "--max-steps", "--max-time", "--batch-size",
                                        "--accumulate-grad-batches", "--default-root-dir", "--ckpt-path",
                                        "--seed", "--cuda-graphs", "--deterministic", "--benchmark",
                                        "--float32-matmul-precision", "--help", "-h"};
  return detail::one_of(flag, names);
}

VOLT_INLINE void Parser::add(std::string flag, std::string metavar, std::string help, std::string default_value,
                             bool takes_value) {
  if (flag.rfind("--", 0) != 0 || flag.size() < 3 || flag.find('=') != std::string::npos) {
    throw std::invalid_argument("volt::cli: a flag name starts with \"--\" and holds no '=', got \"" + flag + "\"");
  }
  if (is_standard(flag) || find_extra(flag) != nullptr) {
    throw std::invalid_argument("volt::cli: the flag " + flag + " is already defined");
  }
  extras_.push_back({std::move(flag), std::move(metavar), std::move(help), std::move(default_value), takes_value});
}

VOLT_INLINE auto Parser::find_extra(std::string_view flag) const -> const Extra* {
  for (const auto& extra : extras_) {
    if (extra.flag == flag) return &extra;
  }
  return nullptr;
}

}  // namespace volt::cli

namespace volt::cli {

VOLT_INLINE auto Parser::add_option(std::string flag, std::string metavar, std::string help,
                                    std::string default_value) -> Parser& {
  add(std::move(flag), std::move(metavar), std::move(help), std::move(default_value), true);
  return *this;
}

}  // namespace volt::cli

/// \file
/// Definitions of the functions declared in volt/cli/args.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::cli {

VOLT_INLINE auto Parser::add_switch(std::string flag, std::string help) -> Parser& {
  add(std::move(flag), {}, std::move(help), {}, false);
  return *this;
}

VOLT_INLINE auto Parser::config_section(std::string name) -> Parser& {
  bool word = !name.empty();
  for (char c : name) {
    word = word && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_');
  }
  if (!word || name == "trainer" || name == "seed_everything" || name == "ckpt_path") {
    throw std::invalid_argument("volt::cli: a config section is a name of letters, digits and '_' other than "
                                "trainer, seed_everything and ckpt_path, got \"" + name + "\"");
  }
  section_ = std::move(name);
  return *this;
}

VOLT_INLINE auto Parser::config_paths(int argc, const char* const* argv) const -> std::vector<std::string> {
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    std::string token = argv[i];
    if (token == "--help" || token == "-h") break;
    const auto equals = token.rfind("--", 0) == 0 ? token.find('=') : std::string::npos;
    const bool attached = equals != std::string::npos;
    if (attached) token.resize(equals);
    const Extra* extra = find_extra(token);
    const bool known = is_standard(token) || extra != nullptr;
    if (!known) break;
    const bool takes_value = extra != nullptr ? extra->takes_value
                                              : token != "--cuda-graphs" && token != "--print-config";
    if (!takes_value || attached) {
      if (token == "--config") paths.emplace_back(argv[i] + equals + 1);
      continue;
    }
    if (i + 1 >= argc) break;
    ++i;
    if (token == "--config") paths.emplace_back(argv[i]);
  }
  return paths;
}

VOLT_INLINE auto Parser::parse(int argc, const char* const* argv) const -> Args {
  Args args = defaults_;
  for (const auto& extra : extras_) {
    if (extra.takes_value) args.values_[extra.flag] = extra.default_value;
  }
  const detail::ConfigFileSupport* config = detail::config_file_support();
  if (config != nullptr) {
    for (const std::string& path : config_paths(argc, argv)) config->load(*this, path, args);
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
    if ((token == "--config" || token == "--print-config") && config == nullptr) {
      throw UsageError("argument " + token + ": config files need the header <volt/cli/config_file.hpp> (and "
                       "yaml-cpp); " + program_ + " was built without it");
    }
    if (token == "--cuda-graphs" || token == "--print-config") {
      if (inline_value) {
        throw UsageError("argument " + token + ": ignored explicit argument " + detail::quoted(*inline_value));
      }
      (token == "--cuda-graphs" ? args.cuda_graphs : args.print_config) = true;
    } else if (token == "--config") {
      (void)value();  // read before the flags, so that the flags win
    } else if (!detail::apply_standard_flag(args, token, value)) {
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
  line("--overfit-batches N|F", "default " + defaults_.overfit_batches.to_string() +
                                   " (train and validate on the same N batches, or fraction F, every epoch)");
  line("--reload-dataloaders-every-n-epochs N",
       "default " + std::to_string(defaults_.reload_dataloaders_every_n_epochs) +
           " (make new loaders from the loader factories every N epochs; 0: never)");
  if (detail::config_file_support() != nullptr) {
    line("--config FILE", "YAML file of options (--print-config's layout); several: later ones win; flags win");
    line("--print-config", "print the effective configuration as YAML and exit");
  } else {
    line("--config FILE", "config file (unavailable: built without <volt/cli/config_file.hpp>)");
    line("--print-config", "print the configuration (unavailable: built without <volt/cli/config_file.hpp>)");
  }
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

VOLT_INLINE bool Parser::is_standard(std::string_view flag) { return detail::one_of(flag, detail::standard_flags); }

VOLT_INLINE void Parser::add(std::string flag, std::string metavar, std::string help, std::string default_value,
                             bool takes_value) {
  if (flag.rfind("--", 0) != 0 || flag.size() < 3 || flag.find('=') != std::string::npos) {
    throw std::invalid_argument("volt::cli: a flag name starts with \"--\" and holds no '=', got \"" + flag + "\"");
  }
  if (is_standard(flag) || find_extra(flag) != nullptr) {
    throw std::invalid_argument("volt::cli: the flag " + flag + " is already defined");
  }
  // Its config-file key: the name without "--", '-' as '_' (Lightning's argument names).
  auto key_of = [](std::string_view name) {
    std::string key(name.substr(2));
    for (char& c : key) c = c == '-' ? '_' : c;
    return key;
  };
  for (const auto& extra : extras_) {
    if (extra.section == section_ && key_of(extra.flag) == key_of(flag)) {
      throw std::invalid_argument("volt::cli: the flag " + flag + " has the config key " + section_ + "." +
                                  key_of(flag) + " of the flag " + extra.flag);
    }
  }
  if (section_ == "data" && key_of(flag) == "batch_size") {
    throw std::invalid_argument("volt::cli: the flag " + flag + " has the config key data.batch_size of --batch-size");
  }
  extras_.push_back(
      {std::move(flag), std::move(metavar), std::move(help), std::move(default_value), takes_value, section_});
}

VOLT_INLINE auto Parser::find_extra(std::string_view flag) const -> const Extra* {
  for (const auto& extra : extras_) {
    if (extra.flag == flag) return &extra;
  }
  return nullptr;
}

}  // namespace volt::cli

namespace volt::cli::detail {

VOLT_INLINE const ConfigFileSupport*& config_file_support() {
  static const ConfigFileSupport* support = nullptr;
  return support;
}

}  // namespace volt::cli::detail

namespace volt::cli {

VOLT_INLINE auto Parser::add_option(std::string flag, std::string metavar, std::string help,
                                    std::string default_value) -> Parser& {
  add(std::move(flag), std::move(metavar), std::move(help), std::move(default_value), true);
  return *this;
}

}  // namespace volt::cli

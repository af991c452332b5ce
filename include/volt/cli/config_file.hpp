/// \file
/// Config files for volt::cli: `--config run.yaml` and `--print-config`, in LightningCLI's layout.
///
/// Optional: only programs that include this header need yaml-cpp (Debian: libyaml-cpp-dev; CMake:
/// `find_package(yaml-cpp)` and link `yaml-cpp`, or `-lyaml-cpp`); <volt/volt.hpp> does not include it.
/// Including it in any source file of a program turns on the two flags for every volt::cli::Parser of the
/// program; a program built without it refuses them with a message naming this header.
///
/// ```yaml
/// seed_everything: 42        # --seed; false or null: not seeded
/// trainer:                   # Lightning's Trainer argument names (the flags with '_' for '-')
///   accelerator: cpu
///   max_epochs: 5
///   precision: bf16-mixed
/// model:                     # the program's own options (Parser::config_section; "model" by default)
///   hidden: 128
/// data:
///   batch_size: 64           # --batch-size
///   data_dir: /data/fmnist   # an option added after parser.config_section("data")
/// ckpt_path: null            # --ckpt-path
/// ```
///
/// Several `--config` files are read in order, key by key (a later file changes only the keys it names); the
/// other flags win over every file wherever they stand on the line. `--print-config` writes the effective
/// configuration in this layout and exits with status 0 without running the program; that output given back
/// with `--config` gives the same Args. A bad file (unreadable, a YAML syntax error, an unknown key, a value
/// the flag would refuse) stops with "<file>:<line>:<column>: ..." naming the key, and exit status 2.
#pragma once

#include <volt/cli/args.hpp>
#include <volt/version.hpp>

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace volt::cli {

namespace detail {

/// The config-file access to Parser's program flags and Args' program values.
struct ConfigFileAccess {
  static const auto& extras(const Parser& parser) { return parser.extras_; }
  static auto& values(Args& args) { return args.values_; }
  static const auto& values(const Args& args) { return args.values_; }
  static auto& given(Args& args) { return args.given_; }
  static const auto& given(const Args& args) { return args.given_; }
};

/// A standard key of config files: where it is ("" for the top level), its name, its flag, and how a YAML
/// value becomes the flag's text.
struct ConfigKey {
  std::string_view section, key, flag;
  enum Kind { text, boolean, devices } kind = text;
  std::string_view null_text{};  ///< What `null` means ("" for flag values without a null: refused).
};

/// Lightning's order (Trainer's arguments, then volt's own TrainerOptions flags).
inline constexpr ConfigKey config_keys[] = {
    {"", "seed_everything", "--seed", ConfigKey::text, "null"},
    {"trainer", "accelerator", "--accelerator"},
    {"trainer", "strategy", "--strategy"},
    {"trainer", "devices", "--devices", ConfigKey::devices},
    {"trainer", "num_nodes", "--num-nodes"},
    {"trainer", "precision", "--precision", ConfigKey::text, "32-true"},
    {"trainer", "max_epochs", "--max-epochs", ConfigKey::text, "null"},
    {"trainer", "max_steps", "--max-steps"},
    {"trainer", "max_time", "--max-time", ConfigKey::text, "null"},
    {"trainer", "overfit_batches", "--overfit-batches"},
    {"trainer", "accumulate_grad_batches", "--accumulate-grad-batches"},
    {"trainer", "deterministic", "--deterministic", ConfigKey::boolean, "null"},
    {"trainer", "benchmark", "--benchmark", ConfigKey::boolean, "null"},
    {"trainer", "reload_dataloaders_every_n_epochs", "--reload-dataloaders-every-n-epochs"},
    {"trainer", "default_root_dir", "--default-root-dir", ConfigKey::text, "null"},
    {"trainer", "cuda_graphs", "--cuda-graphs", ConfigKey::boolean},
    {"trainer", "float32_matmul_precision", "--float32-matmul-precision", ConfigKey::text, "null"},
    {"data", "batch_size", "--batch-size"},
    {"", "ckpt_path", "--ckpt-path", ConfigKey::text, "null"},
};

/// A program flag's config key: its name without "--", '-' as '_'.
inline std::string config_key_of(std::string_view flag) {
  std::string key(flag.substr(2));
  std::replace(key.begin(), key.end(), '-', '_');
  return key;
}

/// Levenshtein distance, for "did you mean".
inline std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

/// The sections of `parser`'s config files, in --print-config's order: model (when it has options), data,
/// then the program's other sections in the order they were first used.
inline std::vector<std::string> config_sections(const Parser& parser) {
  std::vector<std::string> sections;
  for (const auto& extra : ConfigFileAccess::extras(parser)) {
    if (extra.section == "model") sections = {"model"};
  }
  sections.emplace_back("data");
  for (const auto& extra : ConfigFileAccess::extras(parser)) {
    if (std::find(sections.begin(), sections.end(), extra.section) == sections.end()) {
      sections.push_back(extra.section);
    }
  }
  return sections;
}

/// `seconds` as Lightning's "DD:HH:MM:SS" (whole seconds, rounded).
inline std::string dd_hh_mm_ss(double seconds) {
  const auto total = static_cast<long long>(std::llround(seconds));
  auto two = [](long long value) { return std::string(value < 10 ? "0" : "") + std::to_string(value); };
  return two(total / 86400) + ":" + two(total % 86400 / 3600) + ":" + two(total % 3600 / 60) + ":" + two(total % 60);
}

/// "<file>:<line>:<column>: " for a node of the file.
inline std::string config_where(const std::string& path, const YAML::Node& node) {
  const YAML::Mark mark = node.Mark();
  if (mark.is_null()) return path + ": ";
  return path + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1) + ": ";
}

inline std::string yaml_kind(const YAML::Node& node) {
  return node.IsMap() ? "a mapping" : node.IsSequence() ? "a list" : node.IsNull() ? "null" : "a value";
}

/// One key's value: the text the flag takes, or UsageError naming the file, line, key, value and what is allowed.
inline std::string config_value_text(const std::string& where, const std::string& name, const ConfigKey& key,
                                     const YAML::Node& value) {
  if (value.IsNull()) {
    if (!key.null_text.empty()) return std::string(key.null_text);
    throw UsageError(where + name + " (" + std::string(key.flag) + "): null is not allowed; give a value");
  }
  if (key.kind == ConfigKey::devices && value.IsSequence() && value.size() > 0) {
    std::string ids;  // [0, 2] -> "0,2"; [1] -> "1," (device ids, not a count)
    bool scalars = true;
    for (const auto& id : value) {
      scalars = scalars && id.IsScalar();
      if (scalars) ids += id.Scalar() + ",";
    }
    if (scalars) {
      if (value.size() > 1) ids.pop_back();
      return ids;
    }
  }
  if (!value.IsScalar()) {
    throw UsageError(where + name + " (" + std::string(key.flag) + "): expected a single value, got " +
                     yaml_kind(value));
  }
  bool flag = false;
  if (key.kind == ConfigKey::boolean && YAML::convert<bool>::decode(value, flag)) return flag ? "true" : "false";
  return value.Scalar();
}

/// Applies one standard key; throws UsageError with the flag's own message after "<file>:<line>: <key>".
inline void apply_config_key(const std::string& where, const std::string& name, const ConfigKey& key,
                             const YAML::Node& value, Args& args) {
  const std::string text = config_value_text(where, name, key, value);
  const std::string flag(key.flag);
  try {
    if (key.null_text == "null" && text == "null" && !value.IsScalar()) {
      // null: the field's unset state.
      if (flag == "--seed") args.seed.reset();
      else if (flag == "--max-epochs") args.max_epochs.reset();
      else if (flag == "--max-time") args.max_time.reset();
      else if (flag == "--deterministic") args.deterministic = Deterministic{};
      else if (flag == "--benchmark") args.benchmark.reset();
      else if (flag == "--float32-matmul-precision") args.float32_matmul_precision = Float32MatmulPrecision{};
      else if (flag == "--default-root-dir") args.default_root_dir.clear();
      else if (flag == "--ckpt-path") args.ckpt_path.clear();
      return;
    }
    if (flag == "--cuda-graphs") {
      if (text != "true" && text != "false") {
        throw UsageError("argument --cuda-graphs: expected true or false, got " + cli::detail::quoted(text));
      }
      args.cuda_graphs = text == "true";
    } else if (bool seeded = false; flag == "--seed" && YAML::convert<bool>::decode(value, seeded)) {
      if (seeded) {
        throw UsageError("argument --seed: seed_everything: true (a random seed) is not supported; give a "
                         "non-negative integer, or false for no seeding");
      }
      args.seed.reset();
    } else {
      (void)apply_standard_flag(args, flag, [&] { return text; });
    }
  } catch (const UsageError& error) {
    std::string message = error.what();
    const std::string prefix = "argument " + flag + ": ";
    if (message.rfind(prefix, 0) == 0) message.erase(0, prefix.size());
    throw UsageError(where + name + " (" + flag + "): " + message);
  }
}

/// "unknown key '<name>' ... ; did you mean '<closest>'? Allowed keys: ...".
inline std::string unknown_config_key(const std::string& where, const std::string& section, const std::string& key,
                                      const std::vector<std::string>& allowed) {
  std::string closest;
  std::size_t best = std::max<std::size_t>(2, key.size() / 3) + 1;
  std::string list;
  for (const auto& name : allowed) {
    list += (list.empty() ? "" : ", ") + name;
    if (const std::size_t distance = edit_distance(key, name); distance < best) {
      best = distance;
      closest = name;
    }
  }
  return where + "unknown key '" + (section.empty() ? key : section + "." + key) + "'" +
         (closest.empty() ? "" : "; did you mean '" + closest + "'?") + " Allowed keys" +
         (section.empty() ? "" : " in " + section) + ": " + list;
}

/// Reads the keys of one section (or, with `section` empty, the top level's scalar keys) into `args`.
inline void load_config_section(const Parser& parser, const std::string& path, const std::string& section,
                                const YAML::Node& map, Args& args) {
  if (map.IsNull()) return;
  if (!map.IsMap()) {
    throw UsageError(config_where(path, map) + "'" + section + "' holds keys (a mapping), got " + yaml_kind(map));
  }
  for (const auto& entry : map) {
    const std::string key = entry.first.Scalar();
    const std::string where = config_where(path, entry.first);
    const std::string name = section + "." + key;
    std::vector<std::string> allowed;
    bool done = false;
    for (const auto& standard : config_keys) {
      if (standard.section != section) continue;
      allowed.emplace_back(standard.key);
      if (!done && standard.key == key) {
        apply_config_key(where, name, standard, entry.second, args);
        done = true;
      }
    }
    for (const auto& extra : ConfigFileAccess::extras(parser)) {
      if (extra.section != section) continue;
      allowed.push_back(config_key_of(extra.flag));
      if (done || allowed.back() != key) continue;
      done = true;
      const YAML::Node& value = entry.second;
      if (!value.IsNull() && !value.IsScalar()) {
        throw UsageError(where + name + " (" + extra.flag + "): expected a single value, got " + yaml_kind(value));
      }
      if (extra.takes_value) {
        ConfigFileAccess::values(args)[extra.flag] = value.IsNull() ? std::string() : value.Scalar();
        ConfigFileAccess::given(args).insert(extra.flag);
        continue;
      }
      bool on = false;
      if (!value.IsNull() && !YAML::convert<bool>::decode(value, on)) {
        throw UsageError(where + name + " (" + extra.flag + "): expected true or false, got " +
                         cli::detail::quoted(value.Scalar()));
      }
      if (on) ConfigFileAccess::given(args).insert(extra.flag);
      else ConfigFileAccess::given(args).erase(extra.flag);
    }
    if (!done) throw UsageError(unknown_config_key(where, section, key, allowed));
  }
}

}  // namespace detail

/// Reads the config file `path` into `args` (what `--config path` does): the keys it names replace the values
/// in `args`, checked as the flags check them. Throws UsageError "<path>:<line>:<column>: ..." for an unreadable
/// file, a YAML syntax error, an unknown key (with the closest allowed one and the list), or a bad value.
inline void load_config_file(const Parser& parser, const std::string& path, Args& args) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    throw UsageError("argument --config: cannot read " + cli::detail::quoted(path) + ": it is a directory");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError("argument --config: cannot read " + cli::detail::quoted(path) + ": no such readable file");
  YAML::Node root;
  try {
    root = YAML::Load(in);
  } catch (const YAML::Exception& failure) {
    throw UsageError(path + ":" + std::to_string(failure.mark.line + 1) + ":" +
                     std::to_string(failure.mark.column + 1) + ": YAML syntax error: " + failure.msg);
  }
  if (root.IsNull()) return;  // an empty file
  const std::vector<std::string> sections = detail::config_sections(parser);
  std::vector<std::string> allowed = {"seed_everything", "trainer"};
  allowed.insert(allowed.end(), sections.begin(), sections.end());
  allowed.emplace_back("ckpt_path");
  if (!root.IsMap()) {
    throw UsageError(detail::config_where(path, root) + "expected keys (a mapping) at the top level, got " +
                     detail::yaml_kind(root) + ". Allowed keys: seed_everything, trainer, ..., ckpt_path");
  }
  for (const auto& entry : root) {
    const std::string key = entry.first.Scalar();
    const std::string where = detail::config_where(path, entry.first);
    if (key == "seed_everything" || key == "ckpt_path") {
      for (const auto& standard : detail::config_keys) {
        if (standard.section.empty() && standard.key == key) {
          detail::apply_config_key(where, key, standard, entry.second, args);
        }
      }
    } else if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) {
      detail::load_config_section(parser, path, key, entry.second, args);
    } else {
      throw UsageError(detail::unknown_config_key(where, "", key, allowed));
    }
  }
}

/// The effective configuration of `args` as YAML, in load_config_file's layout (what `--print-config` prints):
/// every standard key and every program option, null for the unset ones, headed by the volt version.
inline std::string print_config(const Parser& parser, const Args& args) {
  YAML::Emitter out;
  out.SetNullFormat(YAML::LowerNull);
  // A text that YAML would read back as something else (null, or empty) is written in quotes.
  auto text = [&](const std::string& value) {
    const bool null_like = value.empty() || value == "~" || value == "null" || value == "Null" || value == "NULL";
    if (null_like) out << YAML::DoubleQuoted;
    out << value;
  };
  auto optional_text = [&](bool set, const std::string& value) {
    if (set) text(value);
    else out << YAML::Null;
  };
  auto key = [&](std::string_view name) { out << YAML::Key << std::string(name) << YAML::Value; };
  out << YAML::Comment(std::string("volt==") + volt::version) << YAML::BeginMap;
  key("seed_everything");
  if (args.seed) out << *args.seed;
  else out << false;
  key("trainer");
  out << YAML::BeginMap;
  key("accelerator"); text(args.accelerator);
  key("strategy"); text(args.strategy);
  key("devices"); text(args.devices);
  key("num_nodes"); out << args.num_nodes;
  key("precision"); text(args.precision);
  key("max_epochs"); optional_text(args.max_epochs.has_value(), std::to_string(args.max_epochs.value_or(0)));
  key("max_steps"); out << args.max_steps;
  key("max_time");
  if (args.max_time) out << YAML::DoubleQuoted << detail::dd_hh_mm_ss(args.max_time->seconds());  // a string for PyYAML too
  else out << YAML::Null;
  key("overfit_batches"); out << args.overfit_batches.to_string();
  key("accumulate_grad_batches"); out << args.accumulate_grad_batches;
  key("deterministic"); optional_text(args.deterministic.is_set(), std::string(args.deterministic.name()));
  key("benchmark");
  if (args.benchmark) out << *args.benchmark;
  else out << YAML::Null;
  key("reload_dataloaders_every_n_epochs"); out << args.reload_dataloaders_every_n_epochs;
  key("default_root_dir"); optional_text(!args.default_root_dir.empty(), args.default_root_dir);
  key("cuda_graphs"); out << args.cuda_graphs;
  key("float32_matmul_precision");
  optional_text(args.float32_matmul_precision.is_set(), std::string(args.float32_matmul_precision.name()));
  out << YAML::EndMap;
  for (const std::string& section : detail::config_sections(parser)) {
    key(section);
    out << YAML::BeginMap;
    if (section == "data") {
      key("batch_size");
      out << args.batch_size;
    }
    for (const auto& extra : detail::ConfigFileAccess::extras(parser)) {
      if (extra.section != section) continue;
      key(detail::config_key_of(extra.flag));
      if (extra.takes_value) text(detail::ConfigFileAccess::values(args).at(extra.flag));
      else out << (detail::ConfigFileAccess::given(args).count(extra.flag) != 0);
    }
    out << YAML::EndMap;
  }
  key("ckpt_path"); optional_text(!args.ckpt_path.empty(), args.ckpt_path);
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

namespace detail {

inline const ConfigFileSupport yaml_config_file_support{&load_config_file, &print_config};
/// Registers the support when the program starts (an inline variable: once per program, whichever sources
/// include this header).
inline const bool yaml_config_file_registered = (config_file_support() = &yaml_config_file_support, true);

}  // namespace detail

}  // namespace volt::cli

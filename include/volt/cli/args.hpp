/// \file
/// volt::cli::Parser: Lightning's Trainer flags on the command line, plus a program's own.
///
/// The standard flags are `--accelerator`, `--devices`, `--num-nodes`, `--strategy`, `--precision`,
/// `--max-epochs`, ..., `--overfit-batches`, `--reload-dataloaders-every-n-epochs`, `--cuda-graphs` (the table
/// and volt::cli::Args are in volt/cli/flags.hpp); a program adds its own with add_option and add_switch.
/// `--config FILE` and `--print-config` read and write YAML config files when the program includes
/// volt/cli/config_file.hpp.
///
/// ```
/// volt::cli::Parser parser("fashion_mnist", "Trains an MLP on Fashion-MNIST.");
/// parser.defaults().max_epochs = 5;
/// parser.config_section("data").add_option("--data-dir", "DIR", "folder with the IDX files");
/// parser.add_switch("--no-progress-bar", "print no progress bar");
/// return volt::cli::run(parser, argc, argv, [&]<class A, class S, class P>(volt::cli::Args& args) { ... });
/// ```
///
/// Parsing only checks the text (names, numbers, the device spec's grammar; the accepted values and the
/// number parsing are in volt/cli/values.hpp); volt::cli::run (dispatch.hpp) then checks it against the
/// machine and picks the policy types.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/cli/flags.hpp>
#include <volt/cli/values.hpp>

#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace volt::cli {

namespace detail {

/// What volt/cli/config_file.hpp registers when a program includes it: reading one `--config` file into
/// Args, and writing the effective configuration for `--print-config`.
struct ConfigFileSupport {
  void (*load)(const Parser& parser, const std::string& path, Args& args);  ///< Throws UsageError.
  std::string (*print)(const Parser& parser, const Args& args);             ///< The YAML text.
};

/// The registered support; nullptr in a program that does not include volt/cli/config_file.hpp.
VOLT_INLINE const ConfigFileSupport*& config_file_support();

}  // namespace detail

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
  Parser& add_option(std::string flag, std::string metavar, std::string help, std::string default_value = {});
  /// Adds a switch without a value (`--name`); read it with Args::get_switch.
  Parser& add_switch(std::string flag, std::string help);
  /// The section of config files (volt/cli/config_file.hpp) that holds the options and switches added after
  /// this call, Lightning's `model:` / `data:`: `--data-dir` in section "data" is the key `data: data_dir:`.
  /// "model" until changed. Throws std::invalid_argument for a name that is empty, not made of letters, digits
  /// and '_', or one of the top-level keys (trainer, seed_everything, ckpt_path).
  Parser& config_section(std::string name);

  /// Parses argv[1..argc-1]. Throws UsageError for an unknown flag, a missing value, an invalid choice, a
  /// malformed number or device spec. `--help`/`-h` sets Args::help and stops parsing. With
  /// <volt/cli/config_file.hpp> included in the program, `--config FILE` files are read first, in order, and
  /// the other flags then win over them wherever they stand; without it `--config` and `--print-config` are
  /// refused with a message naming that header.
  Args parse(int argc, const char* const* argv) const;

  /// The usage text printed for --help.
  std::string help() const;

 private:
  friend struct detail::ConfigFileAccess;

  struct Extra {
    std::string flag, metavar, help, default_value;
    bool takes_value;
    std::string section;
  };

  static bool is_standard(std::string_view flag);

  void add(std::string flag, std::string metavar, std::string help, std::string default_value, bool takes_value);

  const Extra* find_extra(std::string_view flag) const;

  /// The `--config` files of the command line, in order, up to the first token the parse will refuse.
  std::vector<std::string> config_paths(int argc, const char* const* argv) const;

  std::string program_;
  std::string description_;
  Args defaults_;
  std::vector<Extra> extras_;
  std::string section_ = "model";
};

}  // namespace volt::cli

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/cli/impl/args.ipp>
#endif

/// \file
/// volt::cli::Args, the parsed command line, and the table of the standard flags (Lightning's Trainer flags):
/// their names (detail::standard_flags) and how each one's text is checked and stored
/// (detail::apply_standard_flag). volt::cli::Parser (volt/cli/args.hpp) reads argv with them, and config files
/// (volt/cli/config_file.hpp) read their keys with them, so both give the same messages.
#pragma once

#include <volt/core/linkage.hpp>
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
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace volt::cli {

class Parser;

namespace detail {
struct ConfigFileAccess;
}  // namespace detail

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
  /// `--overfit-batches`: TrainerOptions::overfit_batches, Lightning's int-or-float rule (text with a '.' is a
  /// fraction of the epoch in [0.0, 1.0], else a count of batches >= 0; a whole float above 1 is a count).
  BatchAmount overfit_batches = 0.0;
  /// `--reload-dataloaders-every-n-epochs`: TrainerOptions::reload_dataloaders_every_n_epochs, an int >= 0.
  std::int64_t reload_dataloaders_every_n_epochs = 0;
  /// Whether `--help` or `-h` was given (parsing stopped there; run() prints the help and returns 0).
  bool help = false;
  /// Whether `--print-config` was given: run() prints the effective configuration as YAML and returns 0
  /// without calling the program (needs <volt/cli/config_file.hpp>).
  bool print_config = false;

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
  /// default_root_dir, seed, cuda_graphs, overfit_batches, reload_dataloaders_every_n_epochs and the math modes (deterministic, benchmark, float32_matmul_precision)
  /// from the command line; everything else at its default, for the program to adjust.
  TrainerOptions trainer_options() const;

  /// Whether the program flag `flag` (e.g. "--data-dir") was given on the command line or in a config file (a
  /// switch: given, or `true` in a file).
  bool is_set(std::string_view flag) const { return given_.count(std::string(flag)) != 0; }
  /// The value of the program option `flag` (its default when not given). Throws std::out_of_range for a
  /// flag the program did not add.
  const std::string& get(std::string_view flag) const;
  /// get(flag) as an integer; throws UsageError when it is not one.
  std::int64_t get_int(std::string_view flag) const;
  /// get(flag) as a number; throws UsageError when it is not one.
  double get_double(std::string_view flag) const { return detail::parse_real(flag, get(flag)); }
  /// Whether the switch `flag` (a flag without value) was given.
  bool get_switch(std::string_view flag) const { return is_set(flag); }

 private:
  friend class Parser;
  friend struct detail::ConfigFileAccess;
  std::map<std::string, std::string, std::less<>> values_;
  std::set<std::string, std::less<>> given_;
};

namespace detail {

/// The reserved flag names: the standard flags, `--config`, `--print-config` and the help flags. A program
/// cannot add a flag of these names.
inline constexpr std::string_view standard_flags[] = {
    "--accelerator", "--devices", "--num-nodes", "--strategy", "--precision", "--max-epochs", "--max-steps",
    "--max-time", "--batch-size", "--accumulate-grad-batches", "--default-root-dir", "--ckpt-path", "--seed",
    "--cuda-graphs", "--deterministic", "--benchmark", "--float32-matmul-precision", "--overfit-batches",
    "--reload-dataloaders-every-n-epochs", "--config", "--print-config", "--help", "-h"};

/// Lightning's int-or-float rule for `text` (a count of batches, or with a '.' a fraction of the epoch) and its
/// range check (Trainer's _determine_batch_limits: [0.0, 1.0], or a whole number: a count). `name` is the
/// Trainer argument named in the message. Throws UsageError "argument <flag>: ...".
VOLT_INLINE BatchAmount parse_batch_amount(std::string_view flag, std::string_view text, std::string_view name);

/// Applies the standard flag `flag` (e.g. "--max-epochs") with the text `value()` to `args`, checking it as the
/// command line does; false when `flag` is not a standard flag taking a value. Throws UsageError
/// "argument <flag>: ..." for a bad value. Config files (volt/cli/config_file.hpp) go through it too.
template <class Value>
bool apply_standard_flag(Args& args, std::string_view flag, Value&& value) {
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
  } else if (flag == "--overfit-batches") {
    args.overfit_batches = parse_batch_amount(flag, value(), "overfit_batches");
  } else if (flag == "--reload-dataloaders-every-n-epochs") {
    const std::string text = value();
    args.reload_dataloaders_every_n_epochs = parse_number<std::int64_t>(flag, text, "an int >= 0");
    if (args.reload_dataloaders_every_n_epochs < 0) {
      throw UsageError("argument --reload-dataloaders-every-n-epochs: `reload_dataloaders_every_n_epochs` should be "
                       "an int >= 0, got " + text + ".");
    }
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

}  // namespace detail

}  // namespace volt::cli

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/cli/impl/flags.ipp>
#endif

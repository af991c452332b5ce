// volt/cli/config_file.hpp: --config and --print-config (built into volt_test_cli where yaml-cpp is found).
#include "test_common.hpp"

#include <volt/cli/config_file.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

/// A folder of config files, removed at the end.
struct Files {
  Files() : dir(fs::temp_directory_path() / ("volt_cli_config_" + std::to_string(::getpid()))) {
    fs::create_directories(dir);
  }
  ~Files() {
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  }
  std::string write(const std::string& name, const std::string& text) const {
    const fs::path path = dir / name;
    std::ofstream(path, std::ios::binary) << text;
    return path.string();
  }
  fs::path dir;
};

volt::cli::Parser program_parser() {
  volt::cli::Parser parser("prog");
  parser.add_option("--hidden", "N", "hidden units", "32");
  parser.add_option("--lr", "LR", "learning rate", "0.1");
  parser.add_switch("--no-bias", "linear layers without bias");
  parser.config_section("data");
  parser.add_option("--data-dir", "DIR", "the data", "data");
  parser.add_option("--note", "TEXT", "free text");
  return parser;
}

volt::cli::Args parse(const volt::cli::Parser& parser, const std::vector<std::string>& flags) {
  std::vector<const char*> argv = {"prog"};
  for (const auto& flag : flags) argv.push_back(flag.c_str());
  return parser.parse(static_cast<int>(argv.size()), argv.data());
}

std::string refusal(const volt::cli::Parser& parser, const std::vector<std::string>& flags) {
  try {
    (void)parse(parser, flags);
  } catch (const volt::cli::UsageError& error) {
    return error.what();
  }
  return "(accepted)";
}

/// The fields of Args a run depends on, as one comparable text.
std::string fingerprint(const volt::cli::Args& args) {
  std::ostringstream out;
  out << args.accelerator << '|' << args.devices << '|' << args.num_nodes << '|' << args.strategy << '|'
      << args.precision << '|' << (args.max_epochs ? std::to_string(*args.max_epochs) : "-") << '|' << args.max_steps
      << '|' << (args.max_time ? args.max_time->to_string() : "-") << '|' << args.batch_size << '|'
      << args.accumulate_grad_batches << '|' << args.default_root_dir << '|' << args.ckpt_path << '|'
      << (args.seed ? std::to_string(*args.seed) : "-") << '|' << args.cuda_graphs << '|' << args.deterministic.name()
      << '|' << (args.benchmark ? (*args.benchmark ? "T" : "F") : "-") << '|' << args.float32_matmul_precision.name()
      << '|' << args.overfit_batches.to_string() << (args.overfit_batches.is_fraction() ? "f" : "c") << '|'
      << args.reload_dataloaders_every_n_epochs;
  for (const char* flag : {"--hidden", "--lr", "--data-dir", "--note"}) out << '|' << args.get(flag);
  out << '|' << args.get_switch("--no-bias");
  return out.str();
}

}  // namespace

TEST_CASE("cli config: --print-config's output given back with --config gives the same Args") {
  const Files files;
  const auto parser = program_parser();
  const std::vector<std::vector<std::string>> lines = {
      {},
      {"--accelerator", "cpu", "--devices", "0,2", "--strategy", "DDP", "--precision", "bf16", "--max-epochs", "7",
       "--max-steps", "100", "--max-time", "00:01:30:00", "--batch-size", "64", "--accumulate-grad-batches", "4",
       "--default-root-dir", "/tmp/runs dir", "--ckpt-path", "last.ckpt", "--seed", "42", "--cuda-graphs",
       "--deterministic", "warn", "--benchmark", "false", "--float32-matmul-precision", "high", "--overfit-batches",
       "0.25", "--reload-dataloaders-every-n-epochs", "2", "--num-nodes", "2", "--hidden", "128", "--lr", "1e-3",
       "--no-bias", "--data-dir", "null", "--note", "a: b # not a comment"},
      {"--devices", "1,", "--overfit-batches", "10", "--deterministic", "true", "--benchmark", "true", "--note", "",
       "--data-dir", "~", "--max-epochs", "-1", "--hidden", "true"},
  };
  for (const auto& line : lines) {
    CAPTURE(line.size());
    const auto first = parse(parser, line);
    const std::string yaml = volt::cli::print_config(parser, first);
    CAPTURE(yaml);
    const std::string path = files.write("round_trip.yaml", yaml);
    const auto again = parse(parser, {"--config", path});
    CHECK(fingerprint(again) == fingerprint(first));
    CHECK(volt::cli::print_config(parser, again) == yaml);
  }
}

TEST_CASE("cli config: --print-config writes Lightning's layout and exits 0 without running the program") {
  const auto parser = program_parser();
  std::vector<const char*> argv = {"prog", "--max-epochs", "5", "--print-config", "--data-dir=/data"};
  std::ostringstream out, err;
  bool called = false;
  const int status = volt::cli::run(
      parser, static_cast<int>(argv.size()), argv.data(),
      [&]<class A, class S, class P>(volt::cli::Args&) { called = true; }, {&out, &err});
  CHECK(status == 0);
  CHECK_FALSE(called);
  CHECK(err.str().empty());
  const std::string expected = "# volt==" + std::string(volt::version) + R"(
seed_everything: false
trainer:
  accelerator: auto
  strategy: auto
  devices: auto
  num_nodes: 1
  precision: 32-true
  max_epochs: 5
  max_steps: -1
  max_time: null
  overfit_batches: 0.0
  accumulate_grad_batches: 1
  deterministic: null
  benchmark: null
  reload_dataloaders_every_n_epochs: 0
  default_root_dir: null
  cuda_graphs: false
  float32_matmul_precision: null
model:
  hidden: 32
  lr: 0.1
  no_bias: false
data:
  batch_size: 32
  data_dir: /data
  note: ""
ckpt_path: null
)";
  CHECK(out.str() == expected);
}

TEST_CASE("cli config: later files win key by key, and flags win over files wherever they stand") {
  const Files files;
  const auto parser = program_parser();
  const std::string base = files.write("base.yaml", R"(seed_everything: 1
trainer:
  max_epochs: 10
  precision: bf16-mixed
  devices: [0, 1]
model:
  hidden: 64
  no_bias: true
data:
  batch_size: 16
)");
  const std::string over = files.write("over.yaml", R"(trainer:
  max_epochs: 20
  deterministic: True
model:
  no_bias: false
ckpt_path: best.ckpt
)");
  const auto args = parse(parser, {"--max-epochs", "3", "--config", base, "--hidden=99", "--config", over});
  CHECK(args.seed == 1u);                 // base only
  CHECK(args.precision == "bf16-mixed");  // base only
  CHECK(args.devices == "0,1");
  CHECK(args.batch_size == 16);
  CHECK(args.max_epochs == 3);            // the flag, before both files
  CHECK(args.get("--hidden") == "99");    // the flag, between the files
  CHECK(args.is_set("--hidden"));
  CHECK_FALSE(args.get_switch("--no-bias"));  // over.yaml's false after base.yaml's true
  CHECK(args.deterministic.name() == "true");
  CHECK(args.ckpt_path == "best.ckpt");
  CHECK(args.get("--lr") == "0.1");       // in no file: the default
  CHECK_FALSE(args.is_set("--lr"));

  const auto reversed = parse(parser, {"--config", over, "--config", base});
  CHECK(reversed.max_epochs == 10);
  CHECK(reversed.get_switch("--no-bias"));
  CHECK(reversed.deterministic.name() == "true");  // base does not name it

  // null resets a key that an earlier file set; an empty file changes nothing.
  const std::string nulls = files.write("nulls.yaml", "seed_everything: null\ntrainer:\n  max_epochs: null\n");
  CHECK_FALSE(parse(parser, {"--config", base, "--config", files.write("no.yaml", "seed_everything: False\n")})
                  .seed.has_value());
  const std::string empty = files.write("empty.yaml", "");
  const auto reset = parse(parser, {"--config", base, "--config=" + nulls, "--config", empty});
  CHECK_FALSE(reset.seed.has_value());
  CHECK_FALSE(reset.max_epochs.has_value());
  CHECK(reset.precision == "bf16-mixed");
}

TEST_CASE("cli config: bad files name the file, the line, the key and what is allowed") {
  const Files files;
  const auto parser = program_parser();
  const std::string unknown = files.write("unknown.yaml", "trainer:\n  accelerator: cpu\n  max_epochz: 3\n");
  CHECK(refusal(parser, {"--config", unknown}) ==
        unknown + ":3:3: unknown key 'trainer.max_epochz'; did you mean 'max_epochs'? Allowed keys in trainer: "
                  "accelerator, strategy, devices, num_nodes, precision, max_epochs, max_steps, max_time, "
                  "overfit_batches, accumulate_grad_batches, deterministic, benchmark, "
                  "reload_dataloaders_every_n_epochs, default_root_dir, cuda_graphs, float32_matmul_precision");
  const std::string section = files.write("section.yaml", "modle:\n  hidden: 3\n");
  CHECK(refusal(parser, {"--config", section}) ==
        section + ":1:1: unknown key 'modle'; did you mean 'model'? Allowed keys: seed_everything, trainer, model, "
                  "data, ckpt_path");
  const std::string program_key = files.write("program.yaml", "data:\n  datadir: x\n");
  CHECK(refusal(parser, {"--config", program_key}) ==
        program_key + ":2:3: unknown key 'data.datadir'; did you mean 'data_dir'? Allowed keys in data: batch_size, "
                      "data_dir, note");

  // Wrong types: the flag's own check, after the file, line and key.
  const std::string type = files.write("type.yaml", "trainer:\n  max_epochs: abc\n");
  CHECK(refusal(parser, {"--config", type}) ==
        type + ":2:3: trainer.max_epochs (--max-epochs): expected an integer, got 'abc'");
  const std::string choice = files.write("choice.yaml", "trainer:\n\n  accelerator: tpu\n");
  CHECK(refusal(parser, {"--config", choice}) ==
        choice + ":3:3: trainer.accelerator (--accelerator): You selected an invalid accelerator name: "
                 "`accelerator='tpu'`. Available names are: auto, cpu, cuda, mps, gpu.");
  const std::string amount = files.write("amount.yaml", "trainer:\n  overfit_batches: 2.5\n");
  CHECK(refusal(parser, {"--config", amount}) ==
        amount + ":2:3: trainer.overfit_batches (--overfit-batches): You have passed invalid value 2.5 for "
                 "overfit_batches, it has to be in [0.0, 1.0] or an int.");
  const std::string mapping = files.write("mapping.yaml", "trainer:\n  max_steps: {a: 1}\n");
  CHECK(refusal(parser, {"--config", mapping}) ==
        mapping + ":2:3: trainer.max_steps (--max-steps): expected a single value, got a mapping");
  const std::string null = files.write("null.yaml", "trainer:\n  num_nodes: null\n");
  CHECK(refusal(parser, {"--config", null}) ==
        null + ":2:3: trainer.num_nodes (--num-nodes): null is not allowed; give a value");
  const std::string random_seed = files.write("seed.yaml", "seed_everything: true\n");
  CHECK(refusal(parser, {"--config", random_seed}).find(random_seed + ":1:1: seed_everything (--seed): "
                                                        "seed_everything: true (a random seed) is not supported") == 0);
  const std::string flag_switch = files.write("switch.yaml", "model:\n  no_bias: maybe\n");
  CHECK(refusal(parser, {"--config", flag_switch}) ==
        flag_switch + ":2:3: model.no_bias (--no-bias): expected true or false, got 'maybe'");
  const std::string list = files.write("list.yaml", "- a\n- b\n");
  CHECK(refusal(parser, {"--config", list}).find(list + ":1:1: expected keys (a mapping) at the top level, got a "
                                                 "list") == 0);

  // YAML syntax, unreadable files.
  const std::string syntax = files.write("syntax.yaml", "trainer:\n  max_epochs: [1, 2\n");
  const std::string syntax_message = refusal(parser, {"--config", syntax});
  CHECK(syntax_message.find(syntax + ":") == 0);
  CHECK(syntax_message.find(": YAML syntax error: ") != std::string::npos);
  const std::string missing = (files.dir / "missing.yaml").string();
  CHECK(refusal(parser, {"--config", missing}) ==
        "argument --config: cannot read '" + missing + "': no such readable file");
  CHECK(refusal(parser, {"--config", files.dir.string()}) ==
        "argument --config: cannot read '" + files.dir.string() + "': it is a directory");
  CHECK(refusal(parser, {"--config"}) == "argument --config: expected one argument");
  CHECK(refusal(parser, {"--print-config=yes"}) == "argument --print-config: ignored explicit argument 'yes'");

  // Through run(): status 2 and the one message.
  std::vector<const char*> argv = {"prog", "--config", type.c_str()};
  std::ostringstream out, err;
  const int status = volt::cli::run(
      parser, static_cast<int>(argv.size()), argv.data(), [&]<class A, class S, class P>(volt::cli::Args&) {},
      {&out, &err});
  CHECK(status == 2);
  CHECK(err.str() == "prog: error: " + type + ":2:3: trainer.max_epochs (--max-epochs): expected an integer, got 'abc'\n");
}

TEST_CASE("cli config: a file is read only when the command line before it parses") {
  const Files files;
  const auto parser = program_parser();
  const std::string bad = files.write("bad.yaml", "trainer:\n  max_epochs: abc\n");
  // An unknown flag before --config is the error, not the file.
  CHECK(refusal(parser, {"--bogus", "--config", bad}).rfind("unrecognized arguments: --bogus", 0) == 0);
  // A value that looks like --config belongs to the flag before it.
  CHECK(parse(parser, {"--note", "--config", "--hidden", "5"}).get("--note") == "--config");
}

TEST_CASE("cli config: without the support registered, --config names the header") {
  auto& support = volt::cli::detail::config_file_support();
  const auto* saved = support;
  support = nullptr;
  const volt::cli::Parser parser("prog");
  const std::string config = refusal(parser, {"--max-steps", "3", "--config", "run.yaml"});
  const std::string print = refusal(parser, {"--print-config"});
  const std::string help = parser.help();
  support = saved;
  CHECK(config == "argument --config: config files need the header <volt/cli/config_file.hpp> (and yaml-cpp); prog "
                  "was built without it");
  CHECK(print.rfind("argument --print-config: config files need the header <volt/cli/config_file.hpp>", 0) == 0);
  CHECK(help.find("unavailable: built without <volt/cli/config_file.hpp>") != std::string::npos);
  CHECK(parser.help().find("several: later ones win") != std::string::npos);
}

TEST_CASE("cli config: the run from a --print-config file is the run from the flags") {
  const Files files;
  const auto parser = program_parser();
  auto run = [&](std::vector<std::string> flags, std::string& out, volt::cli::Args* seen) {
    std::vector<const char*> argv = {"prog"};
    for (const auto& flag : flags) argv.push_back(flag.c_str());
    std::ostringstream out_stream, err_stream;
    const int status = volt::cli::run(
        parser, static_cast<int>(argv.size()), argv.data(),
        [&]<class A, class S, class P>(volt::cli::Args& args) {
          if (seen != nullptr) *seen = args;
          out_stream << A::name << ' ' << S::name << ' ' << P::name;
        },
        {&out_stream, &err_stream});
    out = out_stream.str();
    return status;
  };
  const std::vector<std::string> flags = {"--accelerator", "cpu", "--devices", "2", "--precision", "16-mixed",
                                          "--max-epochs", "2", "--hidden", "7", "--data-dir", "/d"};
  std::string printed, direct, from_file;
  volt::cli::Args direct_args, file_args;
  std::vector<std::string> print_flags = flags;
  print_flags.emplace_back("--print-config");
  REQUIRE(run(print_flags, printed, nullptr) == 0);
  REQUIRE(run(flags, direct, &direct_args) == 0);
  REQUIRE(run({"--config", files.write("run.yaml", printed)}, from_file, &file_args) == 0);
  CHECK(direct == "cpu ddp bf16-mixed");  // 16-mixed on the CPU runs as bf16-mixed, two devices: ddp
  CHECK(from_file == direct);
  CHECK(fingerprint(file_args) == fingerprint(direct_args));
  CHECK(file_args.device_ids == direct_args.device_ids);
  CHECK(file_args.strategy_name == direct_args.strategy_name);
}

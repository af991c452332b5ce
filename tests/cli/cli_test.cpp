#include "test_common.hpp"

#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace {

/// argv from a list of strings (argv[0] = "prog").
struct Argv {
  explicit Argv(std::vector<std::string> args) : storage(std::move(args)) {
    storage.insert(storage.begin(), "prog");
    for (auto& arg : storage) pointers.push_back(arg.c_str());
  }
  int argc() const { return static_cast<int>(pointers.size()); }
  const char* const* argv() const { return pointers.data(); }
  std::vector<std::string> storage;
  std::vector<const char*> pointers;
};

/// What the program saw.
struct Seen {
  std::string accelerator, strategy, precision;
  bool called = false;
  volt::cli::Args args;
};

template <class T>
constexpr std::string_view name_of() {
  return T::name;
}

/// Runs volt::cli::run with `flags`; the program records the policy types it was given.
struct Outcome {
  int status = -1;
  std::string out, err;
  Seen seen;
};

/// Every accelerator, MPS included on every platform, so that a faked Apple machine (ScopedMachine) reaches the
/// MPS Trainer types; the default choices compile MPS on Apple platforms only.
using EveryAccelerator = volt::cli::Choices<volt::cli::type_list<volt::CPU, volt::CUDA, volt::MPS>>;

template <class ChoiceSet = EveryAccelerator>
Outcome run_cli(std::vector<std::string> flags, const volt::cli::Parser& parser = volt::cli::Parser("prog")) {
  Argv argv(std::move(flags));
  Outcome outcome;
  std::ostringstream out, err;
  outcome.status = volt::cli::run<ChoiceSet>(
      parser, argv.argc(), argv.argv(),
      [&]<class A, class S, class P>(volt::cli::Args& args) {
        static_assert(volt::AcceleratorPolicy<A>, "the program receives a concrete accelerator");
        static_assert(volt::strategy_implemented_v<S>);
        static_assert(volt::precision_supported<A, P>::value);
        outcome.seen = {std::string(A::name), std::string(S::name), std::string(P::name), true, args};
        return 0;
      },
      {&out, &err});
  outcome.out = out.str();
  outcome.err = err.str();
  return outcome;
}

void check_usage_error(const std::vector<std::string>& flags, const std::string& message) {
  CAPTURE(flags.empty() ? std::string() : flags.front());
  const auto outcome = run_cli(flags);
  CHECK(outcome.status == 2);
  CHECK_FALSE(outcome.seen.called);
  CHECK(outcome.err.rfind("prog: error: ", 0) == 0);
  CHECK_MESSAGE(outcome.err.find(message) != std::string::npos, outcome.err);
  // one message, one line (the device parser's message may hold Lightning's own "\n But ...")
  CHECK(outcome.err.find("prog: error:", 1) == std::string::npos);
}

}  // namespace

TEST_CASE("cli: --max-time takes Lightning's DD:HH:MM:SS into TrainerOptions::max_time") {
  volt::cli::Parser parser("prog");
  Argv argv({"--max-time", "00:01:30:00"});
  const auto args = parser.parse(argv.argc(), argv.argv());
  REQUIRE(args.max_time.has_value());
  CHECK(args.max_time->seconds() == 5400.0);
  CHECK(args.trainer_options().max_time->seconds() == 5400.0);
  Argv none({"--max-steps", "3"});
  CHECK_FALSE(parser.parse(none.argc(), none.argv()).trainer_options().max_time.has_value());
}

TEST_CASE("cli: parsing the standard flags, both spellings") {
  volt::cli::Parser parser("prog");
  parser.defaults().batch_size = 128;
  Argv argv({"--accelerator", "cpu", "--devices=1", "--strategy", "Single_Device", "--precision", "bf16-mixed",
             "--max-epochs", "3", "--max-steps=7", "--accumulate-grad-batches", "2", "--default-root-dir", "/tmp/x",
             "--ckpt-path", "last.ckpt", "--seed", "42"});
  const auto args = parser.parse(argv.argc(), argv.argv());
  CHECK(args.accelerator == "cpu");
  CHECK(args.devices == "1");
  CHECK(args.strategy == "single_device");  // Lightning lower-cases strategy names
  CHECK(args.precision == "bf16-mixed");
  CHECK(args.max_epochs == 3);
  CHECK(args.max_steps == 7);
  CHECK(args.batch_size == 128);  // the program's default
  CHECK(args.accumulate_grad_batches == 2);
  CHECK(args.default_root_dir == "/tmp/x");
  CHECK(args.ckpt_path == "last.ckpt");
  CHECK(args.seed == 42u);
  const auto options = args.trainer_options();
  CHECK(options.max_epochs == 3);
  CHECK(options.max_steps == 7);
  CHECK(options.accumulate_grad_batches == 2);
  CHECK(options.default_root_dir == "/tmp/x");
  CHECK(options.seed == 42u);
  CHECK(options.devices.python_repr() == "'1'");
}

TEST_CASE("cli: --num-nodes and --cuda-graphs reach TrainerOptions") {
  volt::cli::Parser parser("prog");
  Argv argv({"--num-nodes", "3", "--cuda-graphs", "--devices", "2"});
  auto args = parser.parse(argv.argc(), argv.argv());
  CHECK(args.num_nodes == 3);
  CHECK(args.cuda_graphs);
  auto options = args.trainer_options();
  CHECK(options.num_nodes == 3);
  CHECK(options.cuda_graphs);
  Argv inline_value({"--num-nodes=2"});
  args = parser.parse(inline_value.argc(), inline_value.argv());
  CHECK(args.num_nodes == 2);
  CHECK_FALSE(args.cuda_graphs);
  options = args.trainer_options();
  CHECK(options.num_nodes == 2);
  CHECK_FALSE(options.cuda_graphs);
  // A program may turn graphs on by default; the help says so.
  parser.defaults().cuda_graphs = true;
  CHECK(parser.parse(1, Argv({}).argv()).trainer_options().cuda_graphs);
  const auto help = parser.help();
  CHECK(help.find("--num-nodes N") != std::string::npos);
  CHECK(help.find("--cuda-graphs") != std::string::npos);
  CHECK(help.find("on by default") != std::string::npos);
  // Both are standard flags: a program cannot add them again.
  CHECK_THROWS_AS(parser.add_option("--num-nodes", "N", "taken"), std::invalid_argument);
  CHECK_THROWS_AS(parser.add_switch("--cuda-graphs", "taken"), std::invalid_argument);
}

TEST_CASE("cli: defaults and the auto device spec") {
  const auto args = volt::cli::Parser("prog").parse(1, Argv({}).argv());
  CHECK(args.num_nodes == 1);
  CHECK_FALSE(args.cuda_graphs);
  CHECK(args.trainer_options().num_nodes == 1);
  CHECK_FALSE(args.trainer_options().cuda_graphs);
  CHECK(args.accelerator == "auto");
  CHECK(args.strategy == "auto");
  CHECK(args.precision == "32-true");
  CHECK_FALSE(args.max_epochs.has_value());
  CHECK(args.device_spec().is_auto());
}

TEST_CASE("cli: Lightning's precision aliases") {
  volt_test::CaptureLog log;
  CHECK(volt::cli::normalize_precision("32") == "32-true");
  CHECK(volt::cli::normalize_precision("64") == "64-true");
  CHECK(log.warnings.empty());  // 32 and 64 are silent
  CHECK(volt::cli::normalize_precision("16") == "16-mixed");
  CHECK(log.warned("`precision=16` is supported for historical reasons but its usage is discouraged. Please set "
                   "your precision to 16-mixed instead!"));
  CHECK(volt::cli::normalize_precision("bf16") == "bf16-mixed");
  CHECK(log.warned("Please set your precision to bf16-mixed instead!"));
  for (const auto name : volt::cli::precision_choices) CHECK(volt::cli::normalize_precision(name) == name);
  VOLT_CHECK_THROWS_CONTAINS(volt::cli::normalize_precision("fp16"), volt::cli::UsageError,
                             "Precision 'fp16' is invalid. Allowed precision values: 32-true, 64-true, 16-true, "
                             "bf16-true, 16-mixed, bf16-mixed, 64, 32, 16, bf16");
}

TEST_CASE("cli: a program's own flags") {
  volt::cli::Parser parser("prog");
  parser.add_option("--data-dir", "DIR", "where the data is", "/data")
      .add_option("--rate", "R", "a rate", "0.5")
      .add_switch("--quiet", "say less");
  Argv given({"--rate=0.25", "--quiet"});
  const auto args = parser.parse(given.argc(), given.argv());
  CHECK(args.get("--data-dir") == "/data");
  CHECK_FALSE(args.is_set("--data-dir"));
  CHECK(args.get_double("--rate") == doctest::Approx(0.25));
  CHECK(args.get_switch("--quiet"));
  CHECK_THROWS_AS(args.get("--other"), std::out_of_range);
  CHECK_THROWS_AS(parser.add_option("--seed", "N", "taken"), std::invalid_argument);
  CHECK_THROWS_AS(parser.add_switch("quiet", "no dashes"), std::invalid_argument);
  const auto help = parser.help();
  CHECK(help.find("--data-dir DIR") != std::string::npos);
  CHECK(help.find("--precision {32-true,64-true,16-true,bf16-true,16-mixed,bf16-mixed}") != std::string::npos);
  CHECK(help.find("--accelerator {auto,cpu,cuda,mps,gpu}") != std::string::npos);
}

TEST_CASE("cli: --help prints the usage and exits 0 without running the program") {
  const auto outcome = run_cli({"--max-steps", "3", "--help"});
  CHECK(outcome.status == 0);
  CHECK_FALSE(outcome.seen.called);
  CHECK(outcome.out.find("usage: prog") != std::string::npos);
  CHECK(outcome.err.empty());
}

TEST_CASE("cli: dispatch picks the policy types") {
  SUBCASE("defaults on a machine without GPUs: CPU, single device, 32-true") {
    volt::testing::ScopedMachine machine{{.cuda_device_count = 0, .torch_mps_available = false}};
    const auto outcome = run_cli({});
    CHECK(outcome.status == 0);
    CHECK(outcome.seen.accelerator == "cpu");
    CHECK(outcome.seen.strategy == "single_device");
    CHECK(outcome.seen.precision == "32-true");
    CHECK((outcome.seen.args.accelerator_kind == volt::AcceleratorKind::cpu));
    CHECK(outcome.seen.args.device_ids == std::vector<int>{0});
  }
  SUBCASE("every precision on the CPU") {
    volt::testing::ScopedMachine machine{{}};
    for (const auto* precision : {"32-true", "64-true", "16-true", "bf16-true", "bf16-mixed"}) {
      const auto outcome = run_cli({"--accelerator", "cpu", "--precision", precision});
      CHECK(outcome.status == 0);
      CHECK(outcome.seen.precision == precision);
    }
  }
  SUBCASE("aliases reach the same policies") {
    volt::testing::ScopedMachine machine{{}};
    CHECK(run_cli({"--precision", "64"}).seen.precision == "64-true");
    CHECK(run_cli({"--precision", "32"}).seen.precision == "32-true");
    CHECK(run_cli({"--precision", "bf16"}).seen.precision == "bf16-mixed");
  }
  SUBCASE("16-mixed on the CPU becomes bf16-mixed with Lightning's warning") {
    volt::testing::ScopedMachine machine{{}};
    volt_test::CaptureLog log;
    const auto outcome = run_cli({"--accelerator", "cpu", "--precision", "16-mixed"});
    CHECK(outcome.status == 0);
    CHECK(outcome.seen.precision == "bf16-mixed");
    CHECK(log.warned("but AMP with fp16 is not supported on CPU. Using `precision='bf16-mixed'` instead."));
  }
  SUBCASE("auto and gpu resolve to CUDA on a CUDA machine; ids as asked") {
    volt::testing::ScopedMachine machine{{.cuda_device_count = 4, .processor = "x86_64"}};
    auto outcome = run_cli({"--precision", "16-mixed", "--devices", "1"});
    CHECK(outcome.seen.accelerator == "cuda");
    CHECK(outcome.seen.precision == "16-mixed");
    CHECK(outcome.seen.strategy == "single_device");
    outcome = run_cli({"--accelerator", "gpu", "--devices", "3,", "--precision", "bf16-true"});
    CHECK(outcome.seen.accelerator == "cuda");
    CHECK(outcome.seen.precision == "bf16-true");
    CHECK(outcome.seen.args.device_ids == std::vector<int>{3});
  }
  SUBCASE("auto and gpu resolve to MPS first") {
    volt::testing::ScopedMachine machine{{.cuda_device_count = 1, .torch_mps_available = true}};
    volt::MPS::clear_availability_cache();
    CHECK(run_cli({"--accelerator", "gpu", "--precision", "32"}).seen.accelerator == "mps");
    CHECK(run_cli({}).seen.accelerator == "mps");
    CHECK(run_cli({"--accelerator", "cuda"}).seen.accelerator == "cuda");
    volt::MPS::clear_availability_cache();
  }
  SUBCASE("the default choices compile MPS on Apple platforms only") {
#if defined(__APPLE__)
    static_assert(std::is_same_v<volt::cli::default_accelerators,
                                 volt::cli::type_list<volt::CPU, volt::CUDA, volt::MPS>>);
#else
    static_assert(std::is_same_v<volt::cli::default_accelerators, volt::cli::type_list<volt::CPU, volt::CUDA>>);
    // Only a faked Mac reaches this: a real Linux machine never has MPS, and stops earlier with the reason.
    volt::testing::ScopedMachine machine{{.torch_mps_available = true}};
    volt::MPS::clear_availability_cache();
    const auto outcome = run_cli<volt::cli::AllChoices>({"--accelerator", "mps"});
    CHECK(outcome.status == 2);
    CHECK(outcome.err.find("this program was built for accelerator cpu, cuda only, and the choice resolved to mps") !=
          std::string::npos);
    volt::MPS::clear_availability_cache();
    // The reason comes first on a machine without MPS, with the default choices as with every accelerator.
    volt::testing::ScopedMachine linux_box{{.torch_mps_available = false, .processor = "x86_64"}};
    volt::MPS::clear_availability_cache();
    CHECK(run_cli<volt::cli::AllChoices>({"--accelerator", "mps"}).err.find(
              "`MPSAccelerator` can not run on your system") != std::string::npos);
    volt::MPS::clear_availability_cache();
#endif
  }
  SUBCASE("a Choices list restricts what is compiled and accepted") {
    volt::testing::ScopedMachine machine{{}};
    using Only = volt::cli::Choices<volt::cli::type_list<volt::CPU>, volt::cli::type_list<volt::SingleDevice>,
                                    volt::cli::type_list<volt::FP32, volt::BF16Autocast>>;
    std::ostringstream out, err;
    auto program = [&]<class A, class S, class P>(volt::cli::Args&) {
      static_assert(std::is_same_v<A, volt::CPU> && std::is_same_v<S, volt::SingleDevice>);
      static_assert(std::is_same_v<P, volt::FP32> || std::is_same_v<P, volt::BF16Autocast>);
      return P::name == "bf16-mixed" ? 7 : 0;
    };
    Argv good({"--precision", "bf16-mixed"});
    CHECK(volt::cli::run<Only>(volt::cli::Parser("prog"), good.argc(), good.argv(), program, {&out, &err}) == 7);
    Argv bad({"--precision", "64-true"});
    CHECK(volt::cli::run<Only>(volt::cli::Parser("prog"), bad.argc(), bad.argv(), program, {&out, &err}) == 2);
    CHECK(err.str().find("this program was built for precision 32-true, bf16-mixed only") != std::string::npos);
  }
}

TEST_CASE("cli: the program's status and exceptions") {
  volt::testing::ScopedMachine machine{{}};
  std::ostringstream out, err;
  Argv none({});
  auto run = [&](auto program) {
    err.str("");
    return volt::cli::run(volt::cli::Parser("prog"), none.argc(), none.argv(), program, {&out, &err});
  };
  CHECK(run([]<class A, class S, class P>(volt::cli::Args&) { return 5; }) == 5);
  CHECK(run([]<class A, class S, class P>(volt::cli::Args&) {}) == 0);
  CHECK(run([]<class A, class S, class P>(volt::cli::Args&) -> int {
          throw volt::MisconfigurationError("bad option");
        }) == 2);
  CHECK(err.str() == "prog: error: bad option\n");
  CHECK(run([]<class A, class S, class P>(volt::cli::Args&) -> int { throw std::runtime_error("disk full"); }) == 1);
  CHECK(err.str() == "prog: error: disk full\n");
}

TEST_CASE("cli: bad input exits with status 2 and one message listing the choices") {
  volt::testing::ScopedMachine machine{{.cuda_device_count = 0, .torch_mps_available = false, .processor = "x86_64"}};
  volt::MPS::clear_availability_cache();
  check_usage_error({"--accelerator", "tpu"},
                    "You selected an invalid accelerator name: `accelerator='tpu'`. Available names are: auto, cpu, "
                    "cuda, mps, gpu.");
  check_usage_error({"--accelerator", "CPU"}, "invalid accelerator name: `accelerator='CPU'`");
  check_usage_error({"--strategy", "fsdp"},
                    "You selected an invalid strategy name: `strategy='fsdp'`. Valid choices: auto, single_device, "
                    "ddp.");
  check_usage_error({"--precision", "fp16"}, "Precision 'fp16' is invalid. Allowed precision values: 32-true");
  check_usage_error({"--devices", "1.5"}, "argument --devices: invalid literal for int() with base 10: '1.5'");
  check_usage_error({"--devices", "abc"}, "Valid: auto, a count (1, 2), -1 for every device, or ids such as");
  check_usage_error({"--accelerator", "cpu", "--devices", "0"}, "value is not a valid input using cpu accelerator");
  check_usage_error({"--accelerator", "cpu", "--devices", "-1"},
                    "`devices` selected with `CPUAccelerator` should be an int > 0.");
  check_usage_error({"--accelerator", "cuda"},
                    "`CUDAAccelerator` can not run on your system since the accelerator is not available. The "
                    "following accelerator(s) is available and can be passed into `--accelerator`: ['cpu'].");
  check_usage_error({"--accelerator", "mps"}, "`MPSAccelerator` can not run on your system");
  check_usage_error({"--accelerator", "gpu"}, "No supported gpu backend found!");
  check_usage_error({"--frobnicate"}, "unrecognized arguments: --frobnicate");
  check_usage_error({"--max-epochs"}, "argument --max-epochs: expected one argument");
  check_usage_error({"--max-epochs", "many"}, "argument --max-epochs: expected an integer, got 'many'");
  // One sign, as Python's int(): "+3" is 3, "+-3" and "--3" are not numbers.
  check_usage_error({"--max-epochs=+-3"}, "argument --max-epochs: expected an integer, got '+-3'");
  check_usage_error({"--max-steps=--3"}, "argument --max-steps: expected an integer, got '--3'");
  CHECK(run_cli({"--max-epochs=+3"}).seen.args.max_epochs == 3);
  check_usage_error({"--seed", "-3"}, "argument --seed: expected a non-negative integer, got '-3'");
  check_usage_error({"--max-time", "1:2:3"},
                    "argument --max-time: `Timer(duration='1:2:3')` is not a valid duration. Expected a string in the "
                    "format DD:HH:MM:SS.");
  check_usage_error({"--batch-size", "0"}, "argument --batch-size: expected a positive integer, got 0");
  check_usage_error({"--num-nodes", "0"}, "argument --num-nodes: `num_nodes` must be a positive integer, but got 0.");
  check_usage_error({"--num-nodes=-2"}, "argument --num-nodes: `num_nodes` must be a positive integer, but got -2.");
  check_usage_error({"--num-nodes", "two"}, "argument --num-nodes: expected an integer, got 'two'");
  check_usage_error({"--num-nodes", "1.5"}, "argument --num-nodes: expected an integer, got '1.5'");
  check_usage_error({"--num-nodes", "99999999999"}, "argument --num-nodes: expected an integer, got '99999999999'");
  check_usage_error({"--num-nodes"}, "argument --num-nodes: expected one argument");
  check_usage_error({"--cuda-graphs=yes"}, "argument --cuda-graphs: ignored explicit argument 'yes'");
  check_usage_error({"--accelerator", "cpu", "--devices", "1", "--strategy", "single_device", "--num-nodes", "2"},
                    "argument --strategy single_device: a single-device strategy trains on one machine, but "
                    "--num-nodes 2 was given. Pass --num-nodes 1 or --strategy ddp.");
  check_usage_error({"--accelerator", "cpu", "--devices", "2", "--strategy", "single_device"},
                    "a single-device strategy trains on one device, but --devices 2 selected 2 cpu devices");
  if constexpr (!volt::strategy_implemented_v<volt::DDP>) {
    check_usage_error({"--accelerator", "cpu", "--devices", "2"},
                      "argument --strategy: `strategy=ddp` is not implemented in this version of volt "
                      "(volt::strategy_implemented_v<volt::DDP> is false). Use --strategy single_device with "
                      "--devices 1.");
    check_usage_error({"--strategy", "ddp"}, "is not implemented in this version of volt");
  }
}

TEST_CASE("cli: strategy auto is ddp for more than one device (Lightning's rule)") {
  if constexpr (volt::strategy_implemented_v<volt::DDP>) {
    volt::testing::ScopedMachine machine{{.cuda_device_count = 4, .processor = "x86_64"}};
    auto outcome = run_cli({"--accelerator", "cuda", "--devices", "1,3"});
    CHECK(outcome.status == 0);
    CHECK(outcome.seen.strategy == "ddp");
    CHECK(outcome.seen.args.device_ids == std::vector<int>{1, 3});
    outcome = run_cli({"--accelerator", "cpu", "--devices", "2", "--precision", "bf16-mixed"});
    CHECK(outcome.seen.accelerator == "cpu");
    CHECK(outcome.seen.strategy == "ddp");
    CHECK(outcome.seen.precision == "bf16-mixed");
    outcome = run_cli({"--accelerator", "cuda", "--devices", "1", "--strategy", "ddp"});
    CHECK(outcome.seen.strategy == "ddp");  // asked for: DDP on one device
    CHECK(run_cli({"--accelerator", "cuda", "--devices", "1"}).seen.strategy == "single_device");
    // More than one node is ddp even with one device per node (Lightning: num_nodes=2, devices=1).
    outcome = run_cli({"--accelerator", "cuda", "--devices", "1", "--num-nodes", "2"});
    CHECK(outcome.status == 0);
    CHECK(outcome.seen.strategy == "ddp");
    CHECK(outcome.seen.args.trainer_options().num_nodes == 2);
    CHECK(run_cli({"--accelerator", "cpu", "--devices", "1", "--num-nodes", "1"}).seen.strategy == "single_device");
  } else {
    MESSAGE("skipped: volt::DDP is not implemented in this build");
  }
}

TEST_CASE("cli: unavailable devices and precisions the accelerator cannot do") {
  SUBCASE("more CUDA devices than the machine has") {
    volt::testing::ScopedMachine machine{{.cuda_device_count = 1, .processor = "x86_64"}};
    check_usage_error({"--accelerator", "cuda", "--devices", "2"},
                      "argument --devices 2: You requested gpu: [0, 1]\n But your machine only has: [0]");
    check_usage_error({"--accelerator", "cuda", "--devices", "0,0"}, "Device ID's (GPU) must be unique.");
  }
  SUBCASE("MPS: no float64, no DDP") {
    volt::testing::ScopedMachine machine{{.torch_mps_available = true}};
    volt::MPS::clear_availability_cache();
    check_usage_error({"--accelerator", "mps", "--precision", "64-true"},
                      "precision `64-true` is not supported on the mps accelerator (Metal has no float64). Valid "
                      "choices on mps: 32-true, 16-true, bf16-true, 16-mixed, bf16-mixed.");
    check_usage_error({"--strategy", "ddp"},
                      "You set `strategy=ddp` but strategies from the DDP family are not supported on the MPS "
                      "accelerator. Either explicitly set `--accelerator cpu` or change the strategy");
    volt::MPS::clear_availability_cache();
  }
  SUBCASE("MPS unavailable: the reason") {
    volt::testing::ScopedMachine machine{{.torch_mps_available = true, .processor = "i386"}};
    volt::MPS::clear_availability_cache();
    check_usage_error({"--accelerator", "mps"}, "not natively on arm64");
    volt::MPS::clear_availability_cache();
  }
}

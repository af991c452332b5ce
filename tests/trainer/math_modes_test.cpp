// The math modes (float32_matmul_precision, benchmark, deterministic) of TrainerOptions, FabricOptions and the
// command line: the LibTorch state each sets, Lightning's rules between deterministic and benchmark, the errors
// for bad values, and the tensor-core hint.
#include "test_common.hpp"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace {

/// Restores LibTorch's process-wide math modes and CUBLAS_WORKSPACE_CONFIG on destruction, so that each test
/// starts from and leaves the same state.
class MathModesGuard {
 public:
  MathModesGuard()
      : matmul_(volt::detail::current_float32_matmul_precision().name()),
        benchmark_(at::globalContext().benchmarkCuDNN()),
        deterministic_(at::globalContext().deterministicAlgorithms()),
        warn_only_(at::globalContext().deterministicAlgorithmsWarnOnly()) {
    if (const char* value = std::getenv("CUBLAS_WORKSPACE_CONFIG")) workspace_ = value;
    ::unsetenv("CUBLAS_WORKSPACE_CONFIG");
  }
  ~MathModesGuard() {
    at::globalContext().setFloat32MatmulPrecision(matmul_);
    at::globalContext().setBenchmarkCuDNN(benchmark_);
    at::globalContext().setDeterministicAlgorithms(deterministic_, warn_only_);
    if (workspace_) {
      ::setenv("CUBLAS_WORKSPACE_CONFIG", workspace_->c_str(), 1);
    } else {
      ::unsetenv("CUBLAS_WORKSPACE_CONFIG");
    }
  }
  MathModesGuard(const MathModesGuard&) = delete;
  MathModesGuard& operator=(const MathModesGuard&) = delete;

 private:
  std::string matmul_;
  bool benchmark_, deterministic_, warn_only_;
  std::optional<std::string> workspace_;
};

volt::TrainerOptions quiet(volt::TrainerOptions options) {
  options.enable_progress_bar = false;
  options.enable_model_summary = false;
  options.enable_checkpointing = false;
  options.logger = false;
  return options;
}

std::optional<std::string> workspace_config() {
  const char* value = std::getenv("CUBLAS_WORKSPACE_CONFIG");
  return value ? std::optional<std::string>(value) : std::nullopt;
}

auto& context() { return at::globalContext(); }

}  // namespace

TEST_CASE("math modes: the option types hold what a designated initializer gives them") {
  constexpr volt::Float32MatmulPrecision unset{};
  static_assert(!unset.is_set() && unset.name().empty());
  static_assert(volt::Float32MatmulPrecision("high").level() == volt::Float32MatmulPrecision::Level::high);
  static_assert(volt::Float32MatmulPrecision("medium").name() == "medium");
  static_assert(volt::Deterministic("warn").mode() == volt::Deterministic::Mode::warn);
  static_assert(volt::Deterministic("warn").is_on() && volt::Deterministic(true).is_on());
  static_assert(!volt::Deterministic(false).is_on() && volt::Deterministic(false).is_set());
  static_assert(!volt::Deterministic{}.is_set());
  // An integer is not a truth value here (Lightning accepts bool or "warn").
  static_assert(!std::is_convertible_v<int, volt::Deterministic>);
  static_assert(!std::is_convertible_v<const char*, volt::Deterministic>);

  volt::TrainerOptions options{.deterministic = "warn", .benchmark = true, .float32_matmul_precision = "high"};
  CHECK(options.deterministic.name() == "warn");
  CHECK(options.benchmark == true);
  CHECK(options.float32_matmul_precision.name() == "high");
}

TEST_CASE("math modes: run-time text is parsed, and bad text says what is allowed") {
  CHECK(volt::Float32MatmulPrecision::parse("highest").level() == volt::Float32MatmulPrecision::Level::highest);
  CHECK(volt::Deterministic::parse("true").mode() == volt::Deterministic::Mode::on);
  CHECK(volt::Deterministic::parse("false").mode() == volt::Deterministic::Mode::off);
  CHECK(volt::Deterministic::parse("warn").mode() == volt::Deterministic::Mode::warn);
  CHECK_THROWS_WITH_AS(volt::Float32MatmulPrecision::parse("higher"),
                       "`float32_matmul_precision` must be \"highest\", \"high\" or \"medium\", got \"higher\".",
                       volt::MisconfigurationError);
  CHECK_THROWS_WITH_AS(volt::Deterministic::parse("True"),
                       "`deterministic` must be true, false or \"warn\", got \"True\".", volt::MisconfigurationError);
}

TEST_CASE("math modes: the Trainer sets float32_matmul_precision and leaves it alone when unset") {
  MathModesGuard guard;
  context().setFloat32MatmulPrecision("highest");
  {
    volt::Trainer<volt::CPU> trainer(quiet({.float32_matmul_precision = "high"}));
    CHECK(context().float32MatmulPrecision() == at::Float32MatmulPrecision::HIGH);
  }
  // Not restored when the Trainer goes (a process-wide setting, as torch.set_float32_matmul_precision).
  CHECK(context().float32MatmulPrecision() == at::Float32MatmulPrecision::HIGH);
  volt::Trainer<volt::CPU> medium(quiet({.float32_matmul_precision = "medium"}));
  CHECK(context().float32MatmulPrecision() == at::Float32MatmulPrecision::MEDIUM);
  volt::Trainer<volt::CPU> unset(quiet({}));
  CHECK(context().float32MatmulPrecision() == at::Float32MatmulPrecision::MEDIUM);
  CHECK(volt::detail::current_float32_matmul_precision().name() == "medium");
}

TEST_CASE("math modes: deterministic=true turns on deterministic algorithms, benchmark off, and cuBLAS's workspace") {
  MathModesGuard guard;
  context().setBenchmarkCuDNN(true);
  context().setDeterministicAlgorithms(false, false);
  volt_test::CaptureLog log;
  volt::Trainer<volt::CPU> trainer(quiet({.deterministic = true}));
  CHECK(context().deterministicAlgorithms());
  CHECK_FALSE(context().deterministicAlgorithmsWarnOnly());
  CHECK_FALSE(context().benchmarkCuDNN());  // Lightning: benchmark defaults to False with deterministic
  CHECK(workspace_config() == ":4096:8");
  CHECK_FALSE(log.warned("benchmark"));
  // What an operation without a deterministic implementation meets (e.g. CUDA's index_add_): an error.
  CHECK_THROWS_WITH(context().alertNotDeterministic("volt_test_op"), doctest::Contains("volt_test_op"));
}

TEST_CASE("math modes: deterministic=\"warn\" is deterministic with warnings only") {
  MathModesGuard guard;
  context().setDeterministicAlgorithms(false, false);
  volt::Trainer<volt::CPU> trainer(quiet({.deterministic = "warn"}));
  CHECK(context().deterministicAlgorithms());
  CHECK(context().deterministicAlgorithmsWarnOnly());
  CHECK_FALSE(context().benchmarkCuDNN());
  CHECK(workspace_config() == ":4096:8");
  CHECK_NOTHROW(context().alertNotDeterministic("volt_test_op"));  // a warning only
}

TEST_CASE("math modes: deterministic with benchmark=true keeps benchmark on and warns as Lightning") {
  MathModesGuard guard;
  volt_test::CaptureLog log;
  volt::Trainer<volt::CPU> trainer(quiet({.deterministic = true, .benchmark = true}));
  CHECK(context().benchmarkCuDNN());
  CHECK(context().deterministicAlgorithms());
  // Once (a GPU machine also warns that its GPU is not used by Trainer<CPU>).
  CHECK(std::count(log.warnings.begin(), log.warnings.end(),
                   "You passed `deterministic=True` and `benchmark=True`. Note that PyTorch ignores "
                   "torch.backends.cudnn.deterministic=True when torch.backends.cudnn.benchmark=True.") == 1);
}

TEST_CASE("math modes: deterministic=false turns them off and leaves benchmark and cuBLAS alone") {
  MathModesGuard guard;
  context().setDeterministicAlgorithms(true, true);
  context().setBenchmarkCuDNN(true);
  volt::Trainer<volt::CPU> trainer(quiet({.deterministic = false}));
  CHECK_FALSE(context().deterministicAlgorithms());
  CHECK_FALSE(context().deterministicAlgorithmsWarnOnly());
  CHECK(context().benchmarkCuDNN());
  CHECK(workspace_config() == std::nullopt);
}

TEST_CASE("math modes: unset options leave LibTorch's settings as they are; benchmark alone sets benchmark") {
  MathModesGuard guard;
  context().setDeterministicAlgorithms(true, false);
  context().setBenchmarkCuDNN(true);
  {
    volt::Trainer<volt::CPU> trainer(quiet({}));
    CHECK(context().deterministicAlgorithms());
    CHECK(context().benchmarkCuDNN());
    CHECK(workspace_config() == std::nullopt);
  }
  volt::Trainer<volt::CPU> trainer(quiet({.benchmark = false}));
  CHECK_FALSE(context().benchmarkCuDNN());
  CHECK(context().deterministicAlgorithms());
}

TEST_CASE("math modes: Fabric takes the same options") {
  MathModesGuard guard;
  context().setFloat32MatmulPrecision("highest");
  context().setBenchmarkCuDNN(true);
  volt::Fabric<volt::CPU> fabric({.devices = 1, .deterministic = "warn", .float32_matmul_precision = "high"});
  CHECK(context().float32MatmulPrecision() == at::Float32MatmulPrecision::HIGH);
  CHECK(context().deterministicAlgorithms());
  CHECK(context().deterministicAlgorithmsWarnOnly());
  CHECK_FALSE(context().benchmarkCuDNN());
}

TEST_CASE("math modes: the command line's --deterministic, --benchmark and --float32-matmul-precision") {
  volt::cli::Parser parser("prog");
  const char* argv[] = {"prog", "--deterministic", "warn", "--benchmark=true", "--float32-matmul-precision", "medium"};
  const auto args = parser.parse(6, argv);
  const auto options = args.trainer_options();
  CHECK(options.deterministic.mode() == volt::Deterministic::Mode::warn);
  CHECK(options.benchmark == true);
  CHECK(options.float32_matmul_precision.name() == "medium");

  const char* none[] = {"prog"};
  const auto defaults = parser.parse(1, none).trainer_options();
  CHECK_FALSE(defaults.deterministic.is_set());
  CHECK_FALSE(defaults.benchmark.has_value());
  CHECK_FALSE(defaults.float32_matmul_precision.is_set());

  const char* bad_deterministic[] = {"prog", "--deterministic", "yes"};
  CHECK_THROWS_WITH_AS(parser.parse(3, bad_deterministic),
                       "argument --deterministic: expected true, false or warn, got 'yes'", volt::cli::UsageError);
  const char* bad_benchmark[] = {"prog", "--benchmark", "warn"};
  CHECK_THROWS_WITH_AS(parser.parse(3, bad_benchmark), "argument --benchmark: expected true or false, got 'warn'",
                       volt::cli::UsageError);
  const char* bad_precision[] = {"prog", "--float32-matmul-precision=low"};
  CHECK_THROWS_WITH_AS(parser.parse(2, bad_precision),
                       "argument --float32-matmul-precision: expected highest, high or medium, got 'low'",
                       volt::cli::UsageError);
  const auto help = parser.help();
  CHECK(help.find("--float32-matmul-precision {highest,high,medium}") != std::string::npos);
  CHECK(help.find("--deterministic {true,false,warn}") != std::string::npos);
}

TEST_CASE("math modes: Lightning's tensor-core hint, for compute capability 8 and up at \"highest\" only") {
  const volt::compat::CudaDeviceInfo h200{"NVIDIA H200", 9, 0};
  const volt::compat::CudaDeviceInfo v100{"Tesla V100-SXM2-16GB", 7, 0};
  const auto hint = volt::detail::tensor_core_hint(h200, volt::Float32MatmulPrecision("highest"));
  REQUIRE(hint.has_value());
  CHECK(*hint ==
        "You are using a CUDA device ('NVIDIA H200') that has Tensor Cores. To properly utilize them, you should set "
        "`torch.set_float32_matmul_precision('medium' | 'high')` which will trade-off precision for performance. For "
        "more details, read https://pytorch.org/docs/stable/generated/torch.set_float32_matmul_precision.html"
        "#torch.set_float32_matmul_precision");
  CHECK_FALSE(volt::detail::tensor_core_hint(h200, volt::Float32MatmulPrecision("high")).has_value());
  CHECK_FALSE(volt::detail::tensor_core_hint(h200, volt::Float32MatmulPrecision("medium")).has_value());
  CHECK_FALSE(volt::detail::tensor_core_hint(v100, volt::Float32MatmulPrecision("highest")).has_value());
  // Without a CUDA device there is nothing to ask.
  if (volt::compat::torch_cuda_device_count() == 0) CHECK_FALSE(volt::compat::cuda_device_info(0).has_value());
}

TEST_CASE("math modes on CUDA: \"high\" runs float32 matmuls on TF32 tensor cores; the hint names the device, once") {
  if (!torch::cuda::is_available()) {
    MESSAGE("skipped: no CUDA device (torch::cuda::is_available() is false)");
    return;
  }
  MathModesGuard guard;
  const auto info = volt::compat::cuda_device_info(0);
  REQUIRE(info.has_value());
  const torch::Device cuda(torch::kCUDA, 0);
  torch::manual_seed(0);
  const auto a = torch::randn({1024, 1024}, cuda);
  const auto b = torch::randn({1024, 1024}, cuda);
  const auto reference = a.to(torch::kDouble).mm(b.to(torch::kDouble));
  auto error_at = [&](const char* precision) {
    volt::Trainer<volt::CUDA> trainer(quiet({.devices = 1, .float32_matmul_precision =
                                                               volt::Float32MatmulPrecision::parse(precision)}));
    return (a.mm(b).to(torch::kDouble) - reference).abs().max().item<double>();
  };
  const double highest = error_at("highest");
  const double high = error_at("high");
  MESSAGE("max |error| of a 1024x1024 float32 matmul on " << info->name << ": highest " << highest << ", high "
                                                           << high);
  if (info->major >= 8) {
    CHECK(high > 10 * highest);  // TF32 keeps 10 mantissa bits of float32's 23
  } else {
    CHECK(high == doctest::Approx(highest));
  }

  volt_test::CaptureLog log;
  at::globalContext().setFloat32MatmulPrecision("highest");
  volt::detail::check_cuda_matmul_precision(0);
  volt::detail::check_cuda_matmul_precision(0);
  int hints = 0;
  for (const auto& line : log.infos) hints += line.find("that has Tensor Cores") != std::string::npos;
  CHECK(hints <= 1);  // once per device and process (it may have been printed by an earlier fit)
  if (hints == 1) CHECK(log.informed("('" + info->name + "')"));
  if (info->major < 8) CHECK(hints == 0);
}

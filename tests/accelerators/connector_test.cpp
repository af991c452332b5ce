#include "test_common.hpp"

#include "accelerators/scoped_env.hpp"


#include <stdexcept>
#include <string>
#include <typeinfo>
#include <vector>

namespace {

using volt::AcceleratorKind;
using volt::Frontend;
using volt::testing::ScopedMachine;
using volt_test::ScopedEnv;

const volt::machine::FakeMachine no_gpu{.cuda_device_count = 0, .torch_mps_available = false, .processor = "x86_64"};
const volt::machine::FakeMachine one_cuda{.cuda_device_count = 1, .torch_mps_available = false, .processor = "x86_64"};
const volt::machine::FakeMachine four_cuda{.cuda_device_count = 4, .torch_mps_available = false, .processor = "x86_64"};
const volt::machine::FakeMachine apple{.cuda_device_count = 0, .torch_mps_available = true, .processor = "arm"};

std::vector<torch::Device> devices_of(c10::DeviceType type, std::initializer_list<int> ids) {
  std::vector<torch::Device> devices;
  for (int id : ids) devices.emplace_back(type, static_cast<c10::DeviceIndex>(id));
  return devices;
}

/// Runs `f` and returns the exact dynamic type and message of what it throws.
template <class F>
std::pair<std::string, std::string> thrown(F&& f) {
  try {
    f();
  } catch (const volt::MisconfigurationError& error) {
    return {"MisconfigurationError", error.what()};
  } catch (const std::invalid_argument& error) {
    return {"invalid_argument", error.what()};
  } catch (const std::runtime_error& error) {
    return {typeid(error) == typeid(std::runtime_error) ? "runtime_error" : typeid(error).name(), error.what()};
  }
  return {"nothing", ""};
}

struct NoRank {
  ScopedEnv rank{"RANK", nullptr};
  ScopedEnv local_rank{"LOCAL_RANK", nullptr};
  ScopedEnv slurm{"SLURM_PROCID", nullptr};
  ScopedEnv jsm{"JSM_NAMESPACE_RANK", nullptr};
  ScopedEnv disable_mps{"DISABLE_MPS", nullptr};
  ScopedEnv torchelastic{"TORCHELASTIC_RUN_ID", nullptr};
};

}  // namespace

TEST_CASE("Auto and GPU resolve in Lightning's order") {
  NoRank environment;
  {
    ScopedMachine machine{no_gpu};
    CHECK(volt::resolve_accelerator<volt::Auto>() == AcceleratorKind::cpu);
    CHECK(thrown([] { volt::resolve_accelerator<volt::GPU>(); }) ==
          std::pair<std::string, std::string>{"MisconfigurationError", "No supported gpu backend found!"});
    CHECK(thrown([] { volt::resolve_accelerator<volt::GPU>(Frontend::fabric); }) ==
          std::pair<std::string, std::string>{"runtime_error", "No supported gpu backend found!"});
  }
  {
    ScopedMachine machine{one_cuda};
    CHECK(volt::resolve_accelerator<volt::Auto>() == AcceleratorKind::cuda);
    CHECK(volt::resolve_accelerator<volt::GPU>() == AcceleratorKind::cuda);
  }
  {
    ScopedMachine machine{{.cuda_device_count = 4, .torch_mps_available = true, .processor = "arm64"}};
    CHECK(volt::resolve_accelerator<volt::Auto>() == AcceleratorKind::mps);  // MPS before CUDA
    CHECK(volt::resolve_accelerator<volt::GPU>() == AcceleratorKind::mps);
  }
  {
    ScopedMachine machine{{.cuda_device_count = 2, .torch_mps_available = true, .processor = "i386"}};  // Rosetta
    CHECK(volt::resolve_accelerator<volt::Auto>() == AcceleratorKind::cuda);
  }
  {
    ScopedEnv disable("DISABLE_MPS", "1");
    ScopedMachine machine{apple};
    CHECK(volt::resolve_accelerator<volt::Auto>() == AcceleratorKind::cpu);
    CHECK_THROWS_WITH_AS(volt::resolve_accelerator<volt::GPU>(), "No supported gpu backend found!",
                         volt::MisconfigurationError);
  }
  CHECK(volt::resolve_accelerator<volt::CPU>() == AcceleratorKind::cpu);
  CHECK(volt::resolve_accelerator<volt::CUDA>() == AcceleratorKind::cuda);
  CHECK(volt::resolve_accelerator<volt::MPS>() == AcceleratorKind::mps);
}

TEST_CASE("visit_accelerator calls the policy of the kind") {
  auto name = [](auto policy) { return std::string(decltype(policy)::name); };
  CHECK(volt::visit_accelerator(AcceleratorKind::cpu, name) == "cpu");
  CHECK(volt::visit_accelerator(AcceleratorKind::cuda, name) == "cuda");
  CHECK(volt::visit_accelerator(AcceleratorKind::mps, name) == "mps");
}

TEST_CASE("select_devices: Trainer construction outcomes (spec 3.6, 1.6)") {
  NoRank environment;
  SUBCASE("A1/A3: CPU") {
    ScopedMachine machine{one_cuda};
    const auto selection = volt::select_devices<volt::CPU>(volt::DeviceSpec{});
    CHECK(selection.accelerator == AcceleratorKind::cpu);
    CHECK(selection.parallel_devices == std::vector<torch::Device>{torch::Device("cpu")});
    CHECK(selection.device_ids == std::vector<int>{0});
    CHECK((selection.root_device() == torch::Device("cpu")));
    const auto three = volt::select_devices<volt::CPU>(3);
    CHECK(three.device_ids == std::vector<int>{0, 1, 2});  // `device.index or idx`
    CHECK(three.num_devices() == 3);
    CHECK(volt::select_devices<volt::CPU>("2").num_devices() == 2);
    CHECK_THROWS_WITH_AS(volt::select_devices<volt::CPU>(-1), "`devices` selected with `CPUAccelerator` should be an int > 0.",
                         std::invalid_argument);
    ScopedMachine nothing{no_gpu};
    const auto automatic = volt::select_devices<volt::Auto>(volt::DeviceSpec{});
    CHECK(automatic.accelerator == AcceleratorKind::cpu);
    CHECK(automatic.device_ids == std::vector<int>{0});
  }
  SUBCASE("A2: one CUDA device") {
    ScopedMachine machine{one_cuda};
    for (const volt::DeviceSpec& spec : {volt::DeviceSpec{}, volt::DeviceSpec{-1}, volt::DeviceSpec{"-1"},
                                         volt::DeviceSpec{"0,"}, volt::DeviceSpec{1}}) {
      CAPTURE(spec.python_repr());
      for (const auto& selection : {volt::select_devices<volt::Auto>(spec), volt::select_devices<volt::GPU>(spec),
                                    volt::select_devices<volt::CUDA>(spec)}) {
        CHECK(selection.accelerator == AcceleratorKind::cuda);
        CHECK((selection.root_device() == torch::Device("cuda:0")));
        CHECK(selection.device_ids == std::vector<int>{0});
      }
    }
    CHECK_THROWS_WITH_AS(volt::select_devices<volt::CUDA>(2), "You requested gpu: [0, 1]\n But your machine only has: [0]",
                         volt::MisconfigurationError);
    CHECK_THROWS_WITH_AS(volt::select_devices<volt::CUDA>(volt::devices({1})),
                         "You requested gpu: [1]\n But your machine only has: [0]", volt::MisconfigurationError);
    CHECK_THROWS_WITH_AS(volt::select_devices<volt::CUDA>(volt::devices({0, 0})), "Device ID's (GPU) must be unique.",
                         volt::MisconfigurationError);
  }
  SUBCASE("four CUDA devices") {
    ScopedMachine machine{four_cuda};
    const auto all = volt::select_devices<volt::Auto>(volt::DeviceSpec{});
    CHECK(all.parallel_devices == devices_of(torch::kCUDA, {0, 1, 2, 3}));
    CHECK(all.device_ids == std::vector<int>{0, 1, 2, 3});
    const auto third = volt::select_devices<volt::Auto>(volt::devices({3}));
    CHECK((third.root_device() == torch::Device("cuda:3")));
    CHECK(third.device_ids == std::vector<int>{3});
    const auto pair = volt::select_devices<volt::GPU>("1,3");
    CHECK(pair.device_ids == std::vector<int>{1, 3});
    CHECK((pair.root_device() == torch::Device("cuda:1")));
    // Python's `device.index or idx`: index 0 is falsy, so cuda:0 in second place reports its position.
    const auto reordered = volt::select_devices<volt::CUDA>("3,0");
    CHECK(reordered.parallel_devices == devices_of(torch::kCUDA, {3, 0}));
    CHECK(reordered.device_ids == std::vector<int>{3, 1});
  }
  SUBCASE("A4-A7: MPS") {
    ScopedMachine machine{apple};
    for (const volt::DeviceSpec& spec : {volt::DeviceSpec{}, volt::DeviceSpec{1}, volt::DeviceSpec{-1}, volt::DeviceSpec{"-1"},
                                         volt::devices({0}), volt::DeviceSpec{"0,"}, volt::DeviceSpec{"1"}}) {
      CAPTURE(spec.python_repr());
      for (const auto& selection : {volt::select_devices<volt::Auto>(spec), volt::select_devices<volt::GPU>(spec),
                                    volt::select_devices<volt::MPS>(spec)}) {
        CHECK(selection.accelerator == AcceleratorKind::mps);
        CHECK((selection.root_device() == torch::Device(torch::kMPS, 0)));
        CHECK(selection.device_ids == std::vector<int>{0});
      }
    }
    CHECK_THROWS_WITH_AS(volt::select_devices<volt::MPS>(2), "You requested gpu: [0, 1]\n But your machine only has: [0]",
                         volt::MisconfigurationError);
    CHECK_THROWS_WITH_AS(volt::select_devices<volt::MPS>(volt::devices({1})),
                         "You requested gpu: [1]\n But your machine only has: [0]", volt::MisconfigurationError);
    CHECK_THROWS_WITH_AS(volt::select_devices<volt::MPS>(volt::devices({0, 0})), "Device ID's (GPU) must be unique.",
                         volt::MisconfigurationError);
    CHECK_THROWS_WITH_AS(volt::select_devices<volt::MPS>("0,0"), "Device ID's (GPU) must be unique.",
                         volt::MisconfigurationError);
    // Fabric shares the parser: the same MisconfigurationError.
    CHECK_THROWS_AS(volt::select_devices<volt::MPS>(2, Frontend::fabric), volt::MisconfigurationError);
  }
}

TEST_CASE("select_devices refuses specs that select no device (spec 1.6)") {
  NoRank environment;
  const std::string hint =
      " accelerator. Ask for at least one device: a count > 0, -1 for every device, or ids such as volt::devices({0}) ";
  {
    ScopedMachine machine{no_gpu};
    CHECK(thrown([] { volt::select_devices<volt::CPU>(0); }) ==
          std::pair<std::string, std::string>{
              "MisconfigurationError",
              "`volt::Trainer({.devices = 0})` value is not a valid input using cpu" + hint + "(Lightning: `Trainer(devices=0)`)."});
    CHECK(thrown([] { volt::select_devices<volt::CPU>("0"); }).second ==
          "`volt::Trainer({.devices = \"0\"})` value is not a valid input using cpu" + hint +
              "(Lightning: `Trainer(devices='0')`).");
    CHECK(thrown([] { volt::select_devices<volt::Auto>(volt::devices({})); }).second ==
          "`volt::Trainer({.devices = volt::devices({})})` value is not a valid input using cpu" + hint +
              "(Lightning: `Trainer(devices=[])`).");
    // The check comes before availability: MPS on a machine without MPS still names the devices.
    CHECK(thrown([] { volt::select_devices<volt::MPS>(0); }).second ==
          "`volt::Trainer({.devices = 0})` value is not a valid input using mps" + hint + "(Lightning: `Trainer(devices=0)`).");
    // ... but the Trainer resolves "gpu" first.
    CHECK(thrown([] { volt::select_devices<volt::GPU>(0); }) ==
          std::pair<std::string, std::string>{"MisconfigurationError", "No supported gpu backend found!"});
    // Fabric checks before resolving, so the message names the flag, and raises ValueError.
    CHECK(thrown([] { volt::select_devices<volt::GPU>(0, Frontend::fabric); }) ==
          std::pair<std::string, std::string>{
              "invalid_argument",
              "`volt::Fabric({.devices = 0})` value is not a valid input using gpu" + hint + "(Lightning: `Fabric(devices=0)`)."});
    // Lightning lets " 0 " through and then fails with a TypeError; volt refuses it here.
    CHECK(thrown([] { volt::select_devices<volt::CUDA>(" 0 "); }).first == "MisconfigurationError");
  }
  {
    ScopedMachine machine{one_cuda};
    CHECK(thrown([] { volt::select_devices<volt::Auto>(0); }).second ==
          "`volt::Trainer({.devices = 0})` value is not a valid input using cuda" + hint + "(Lightning: `Trainer(devices=0)`).");
    CHECK(thrown([] { volt::select_devices<volt::Auto>(0, Frontend::fabric); }).second ==
          "`volt::Fabric({.devices = 0})` value is not a valid input using auto" + hint + "(Lightning: `Fabric(devices=0)`).");
  }
}

TEST_CASE("select_devices: an unavailable accelerator (spec 3.3)") {
  NoRank environment;
  const std::string mps_hint =
      " MPS needs an Apple-silicon Mac with macOS 12.3 or later, a process running natively on arm64 (not under "
      "Rosetta), a LibTorch built with MPS, and DISABLE_MPS not set to 1.";
  {
    ScopedMachine machine{one_cuda};
    CHECK(thrown([] { volt::select_devices<volt::MPS>(1); }) ==
          std::pair<std::string, std::string>{
              "MisconfigurationError",
              "`MPSAccelerator` can not run on your system since the accelerator is not available. The following "
              "accelerator(s) is available and can be passed as the Accelerator template argument of `volt::Trainer`: "
              "['cuda', 'cpu'] (volt::CUDA, volt::CPU)." + mps_hint});
    CHECK(thrown([] { volt::select_devices<volt::MPS>(volt::DeviceSpec{}, Frontend::fabric); }) ==
          std::pair<std::string, std::string>{
              "runtime_error",
              "`MPSAccelerator` can not run on your system since the accelerator is not available. The following "
              "accelerator(s) is available and can be passed as the Accelerator template argument of `volt::Fabric`: "
              "['cuda', 'cpu'] (volt::CUDA, volt::CPU)." + mps_hint});
  }
  {
    ScopedMachine machine{apple};
    CHECK(thrown([] { volt::select_devices<volt::CUDA>(1); }) ==
          std::pair<std::string, std::string>{
              "MisconfigurationError",
              "`CUDAAccelerator` can not run on your system since the accelerator is not available. The following "
              "accelerator(s) is available and can be passed as the Accelerator template argument of `volt::Trainer`: "
              "['mps', 'cpu'] (volt::MPS, volt::CPU). CUDA needs a LibTorch built with CUDA and at least one visible "
              "NVIDIA GPU (check nvidia-smi and CUDA_VISIBLE_DEVICES)."});
  }
  {
    ScopedMachine machine{no_gpu};
    CHECK(thrown([] { volt::select_devices<volt::CUDA>(volt::DeviceSpec{}); }).second.find("['cpu'] (volt::CPU).") !=
          std::string::npos);
  }
}

TEST_CASE("log_device_info: the startup line and the unused-GPU warning (spec 3.5)") {
  NoRank environment;
  const std::string warning =
      "GPU available but not used. You can set it by doing `volt::Trainer<volt::GPU>` (or volt::CUDA / volt::MPS as the "
      "Accelerator template argument; Lightning: `Trainer(accelerator='gpu')`).";
  auto run = [](const volt::machine::FakeMachine& fake, AcceleratorKind used) {
    ScopedMachine machine{fake};
    auto log = std::make_unique<volt_test::CaptureLog>();
    volt::log_device_info(used);
    return log;
  };
  {
    auto log = run(one_cuda, AcceleratorKind::cuda);
    CHECK(log->infos == std::vector<std::string>{"GPU available: True (cuda), used: True"});
    CHECK(log->warnings.empty());
  }
  {
    auto log = run(one_cuda, AcceleratorKind::cpu);  // A1
    CHECK(log->infos == std::vector<std::string>{"GPU available: True (cuda), used: False"});
    CHECK(log->warnings == std::vector<std::string>{warning});
  }
  {
    auto log = run(apple, AcceleratorKind::mps);
    CHECK(log->infos == std::vector<std::string>{"GPU available: True (mps), used: True"});
    CHECK(log->warnings.empty());
  }
  {
    auto log = run(apple, AcceleratorKind::cpu);
    CHECK(log->infos == std::vector<std::string>{"GPU available: True (mps), used: False"});
    CHECK(log->warnings == std::vector<std::string>{warning});
  }
  {
    auto log = run(no_gpu, AcceleratorKind::cpu);  // A3
    CHECK(log->infos == std::vector<std::string>{"GPU available: False, used: False"});
    CHECK(log->warnings.empty());
  }
  {
    // CUDA is named first although Auto prefers MPS; and MPS in use leaves CUDA "not used".
    auto log = run({.cuda_device_count = 1, .torch_mps_available = true, .processor = "arm64"}, AcceleratorKind::mps);
    CHECK(log->infos == std::vector<std::string>{"GPU available: True (cuda), used: True"});
    CHECK(log->warnings == std::vector<std::string>{warning});
  }
  {
    // The warning is printed once per process; the line at every construction.
    ScopedMachine machine{one_cuda};
    volt_test::CaptureLog log;
    volt::log_device_info(AcceleratorKind::cpu);
    volt::log_device_info(AcceleratorKind::cpu);
    CHECK(log.infos.size() == 2);
    CHECK(log.warnings.size() == 1);
  }
  {
    // Rank zero only.
    ScopedEnv rank("RANK", "1");
    ScopedMachine machine{one_cuda};
    volt_test::CaptureLog log;
    volt::log_device_info(AcceleratorKind::cpu);
    CHECK(log.infos.empty());
    CHECK(log.warnings.empty());
  }
}

// Compile-time rules. The failing combinations are compile-fail tests (tests/compile_fail/accelerators_*).
static_assert(!volt::strategy_supported_v<volt::MPS, volt::DDP>);
static_assert(volt::strategy_supported_v<volt::MPS, volt::SingleDevice>);
static_assert(volt::strategy_supported_v<volt::CUDA, volt::DDP>);
static_assert(volt::strategy_supported_v<volt::CPU, volt::DDP>);
static_assert(volt::strategy_supported_v<volt::Auto, volt::DDP>);  // decided at run time
static_assert(volt::static_devices<volt::MPS, 1> == volt::DeviceSpec{1});
static_assert(volt::static_devices<volt::MPS, -1>.selects_all());
static_assert(volt::static_devices<volt::MPS, "0,">.ids().equals({0}));
static_assert(volt::static_devices<volt::MPS, volt::devices({0})>.ids().equals({0}));
static_assert(volt::static_devices<volt::CUDA, "0,2">.ids().equals({0, 2}));
static_assert(volt::static_devices<volt::CUDA, 8>.count() == 8);
static_assert(volt::static_devices<volt::CPU, "3">.count() == 3);
static_assert(volt::static_devices<volt::Auto, 2>.count() == 2);

namespace {
struct MyAccelerator {};
struct MyDistributed {
  static constexpr bool is_distributed = true;
};
struct NoFlag {};
}  // namespace
template <>
struct volt::strategy_supported<MyAccelerator, volt::DDP> : std::false_type {};
template <>
struct volt::strategy_supported<volt::MPS, MyDistributed> : std::true_type {};  // a user's own decision wins
static_assert(!volt::strategy_supported_v<MyAccelerator, volt::DDP>);
static_assert(volt::strategy_supported_v<volt::MPS, MyDistributed>);
static_assert(volt::strategy_supported_v<volt::MPS, NoFlag>);

TEST_CASE("check_strategy_supported compiles for supported pairs") {
  volt::check_strategy_supported<volt::MPS, volt::SingleDevice>();
  volt::check_strategy_supported<volt::CUDA, volt::DDP>();
  volt::check_strategy_supported<volt::MPS, MyDistributed>();
  CHECK(true);
}

TEST_CASE("MPS with a DDP strategy chosen at run time (spec 3.4)") {
  NoRank environment;
  const std::string message =
      "You set `strategy=ddp` but strategies from the DDP family are not supported on the MPS accelerator. Either "
      "explicitly choose volt::CPU as the accelerator or change the strategy (volt::SingleDevice) (Lightning: \"Either "
      "explicitly set `accelerator='cpu'` or change the strategy.\")";
  {
    ScopedMachine machine{apple};
    CHECK_THROWS_WITH_AS((volt::check_strategy_supported_on_machine<volt::Auto, volt::DDP>()), message.c_str(),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS((volt::check_strategy_supported_on_machine<volt::GPU, volt::DDP>()), message.c_str(),
                         std::invalid_argument);
    CHECK_NOTHROW((volt::check_strategy_supported_on_machine<volt::CPU, volt::DDP>()));  // allowed on a Mac
    CHECK_NOTHROW((volt::check_strategy_supported_on_machine<volt::Auto, volt::SingleDevice>()));
  }
  {
    ScopedMachine machine{four_cuda};
    CHECK_NOTHROW((volt::check_strategy_supported_on_machine<volt::Auto, volt::DDP>()));
  }
}

#include "test_common.hpp"

#include "lr_find_recorded.hpp"
#include "trainer/trainer_fixtures.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace {

namespace recorded = lr_find_recorded;

volt::LRFinderResult result_of(const std::string& mode, std::vector<double> lrs, std::vector<double> losses) {
  volt::LRFinderResult result;
  result.mode = mode;
  result.lrs = std::move(lrs);
  result.losses = std::move(losses);
  return result;
}

/// Linear regression 4 -> 1 trained with SGD (momentum 0.9) built in configure_optimizers, or, with
/// `keep_optimizer`, with one Adam the model owns and returns each time (its state must survive lr_find).
struct Regression : torch::nn::Module {
  explicit Regression(bool keep_optimizer = false) {
    register_module("linear", linear);
    register_buffer("seen", seen);
    if (keep_optimizer) adam = std::make_shared<torch::optim::Adam>(parameters(), torch::optim::AdamOptions(lr));
  }
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t, volt::StepContext&) {
    ++steps;
    seen += 1;
    return torch::nn::functional::mse_loss(linear->forward(batch.data), batch.target);
  }
  volt::OptimizerConfig configure_optimizers() {
    if (adam) return {adam};
    return {std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(lr).momentum(0.9))};
  }
  torch::nn::Linear linear{4, 1};
  torch::Tensor seen = torch::zeros({1});
  std::shared_ptr<torch::optim::Adam> adam;
  double lr = 1e-3;
  std::int64_t steps = 0;
};

/// 20 batches of 16 samples of y = x . w + noise.
std::vector<torch::data::Example<>> regression_batches() {
  torch::manual_seed(3);
  const auto w = torch::tensor({1.0, -2.0, 0.5, 3.0}).unsqueeze(1);
  std::vector<torch::data::Example<>> batches;
  for (int i = 0; i < 20; ++i) {
    const auto x = torch::randn({16, 4});
    batches.push_back({x, x.matmul(w) + 0.1 * torch::randn({16, 1})});
  }
  return batches;
}

volt::TrainerOptions quiet() { return {.devices = 1, .default_root_dir = "unused"}; }

}  // namespace

TEST_CASE("tuner: lr_find's suggestion on Lightning's recorded curves gives Lightning's index and value") {
  const auto exponential = result_of("exponential", recorded::exponential_lrs, recorded::exponential_losses);
  REQUIRE(exponential.suggestion_index().has_value());
  CHECK(*exponential.suggestion_index() == static_cast<std::size_t>(recorded::exponential_index));
  CHECK(*exponential.suggestion() == recorded::exponential_suggestion);  // bit for bit
  const auto linear = result_of("linear", recorded::linear_lrs, recorded::linear_losses);
  REQUIRE(linear.suggestion_index().has_value());
  CHECK(*linear.suggestion_index() == static_cast<std::size_t>(recorded::linear_index));
  CHECK(*linear.suggestion() == recorded::linear_suggestion);
}

TEST_CASE("tuner: lr_find's suggestion skips non-finite losses and says when it cannot suggest") {
  // Without the NaN (index 2), the inf (6) and the last point, torch.gradient gives
  // [0, -0.1667, -26.17, -20, -1] (computed with torch 2.11): the steepest point is index 3.
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const auto curve = result_of("linear", {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8}, {5, 5, nan, 4.9, 1, 0.9, inf, 0.8});
  CHECK(curve.suggestion_index(0, 1) == std::optional<std::size_t>(3));
  CHECK(curve.suggestion(0, 1) == std::optional<double>(0.4));
  volt_test::CaptureLog log;
  CHECK_FALSE(curve.suggestion(0, 0).has_value());  // Python's [0:-0] is empty, as in Lightning
  CHECK_FALSE(curve.suggestion().has_value());      // 8 points, skip_begin 10
  CHECK_FALSE(result_of("linear", {}, {}).suggestion(0, 1).has_value());
  CHECK(log.warned("Failed to compute suggestion for learning rate because there are not enough points. "
                   "Increase the loop iteration limits or the size of your dataset/dataloader."));
}

TEST_CASE("tuner: the sweep's learning rates are Lightning's, in both modes") {
  const volt::LRFinderOptions exponential{};
  REQUIRE(recorded::exponential_lrs.size() == 100);
  for (std::size_t i = 0; i < recorded::exponential_lrs.size(); ++i) {
    CHECK(volt::lr_finder_learning_rate(exponential, static_cast<std::int64_t>(i)) == recorded::exponential_lrs[i]);
  }
  const volt::LRFinderOptions linear{.min_lr = 1e-4, .max_lr = 0.5, .num_training = 60, .mode = "linear"};
  for (std::size_t i = 0; i < recorded::linear_lrs.size(); ++i) {
    CHECK(volt::lr_finder_learning_rate(linear, static_cast<std::int64_t>(i)) == recorded::linear_lrs[i]);
  }
  CHECK(volt::lr_finder_learning_rate(linear, 59) == 0.5);
}

TEST_CASE("tuner: the loss smoothing and the divergence stop are Lightning's") {
  // Lightning's raw training losses through the smoother give its smoothed losses exactly, and the
  // linear sweep stops at the step where Lightning's stopped.
  for (const bool is_linear : {false, true}) {
    const auto& raw = is_linear ? recorded::linear_raw_losses : recorded::exponential_raw_losses;
    const auto& smoothed = is_linear ? recorded::linear_losses : recorded::exponential_losses;
    REQUIRE(raw.size() == smoothed.size());
    volt::LRFinderLossSmoother smoother(4.0);
    std::size_t stopped_at = raw.size();
    for (std::size_t i = 0; i < raw.size(); ++i) {
      const bool stop = smoother.add(raw[i], static_cast<std::int64_t>(i + 1));
      CHECK(smoother.smoothed() == smoothed[i]);
      if (stop && stopped_at == raw.size()) stopped_at = i;
    }
    CHECK(stopped_at == (is_linear ? raw.size() - 1 : raw.size()));
  }
  volt::LRFinderLossSmoother never(std::nullopt);
  for (int step = 1; step < 5; ++step) CHECK_FALSE(never.add(1e6 * step, step));
}

TEST_CASE("tuner: lr_find sweeps with a Trainer, stops on divergence, and sets the model's lr") {
  auto model = std::make_shared<Regression>();
  volt_test::CaptureLog log;
  const auto result = volt::lr_find<volt::CPU, volt::SingleDevice, volt::FP32>(
      quiet(), model, regression_batches(), {.min_lr = 1e-5, .max_lr = 10.0, .num_training = 50});
  // SGD at lr near 10 diverges on this problem: the sweep stops before 50 steps.
  CHECK(result.stopped_early);
  REQUIRE(result.losses.size() == result.lrs.size());
  CHECK(result.losses.size() < 50);
  CHECK(model->steps == static_cast<std::int64_t>(result.losses.size()));  // the data (20 batches) cycled
  CHECK(result.losses.size() > 20);
  for (std::size_t i = 0; i < result.lrs.size(); ++i) {
    CHECK(result.lrs[i] == volt::lr_finder_learning_rate({.min_lr = 1e-5, .max_lr = 10.0, .num_training = 50},
                                                         static_cast<std::int64_t>(i)));
  }
  double best = result.losses.front();
  for (std::size_t i = 1; i + 1 < result.losses.size(); ++i) best = std::min(best, result.losses[i]);
  CHECK(result.losses.back() > 4.0 * best);
  CHECK(log.informed("LR finder stopped early after " + std::to_string(result.losses.size()) +
                     " steps due to diverging loss."));
  const auto suggestion = result.suggestion();
  REQUIRE(suggestion.has_value());
  CHECK(model->lr == *suggestion);  // update_attr
  CHECK(log.informed("Learning rate set to "));
}

TEST_CASE("tuner: lr_find counts optimizer steps under gradient accumulation; `lr` wins over `learning_rate`") {
  struct Named : Regression {
    volt::OptimizerConfig configure_optimizers() {
      return {std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(learning_rate))};
    }
    float learning_rate = 0.01f;
  };
  auto model = std::make_shared<Named>();
  volt::TrainerOptions options = quiet();
  options.accumulate_grad_batches = 2;
  const auto result = volt::lr_find<volt::CPU, volt::SingleDevice, volt::FP32>(
      options, model, regression_batches(), {.min_lr = 1e-4, .max_lr = 1e-2, .num_training = 20});
  // One point per optimizer step (every second batch), as Lightning records them.
  CHECK(result.losses.size() == 20);
  CHECK(model->steps == 40);
  CHECK_FALSE(result.stopped_early);
  CHECK(result.lrs.back() == doctest::Approx(1e-2));
  const auto suggestion = result.suggestion();
  REQUIRE(suggestion.has_value());
  // Lightning looks for `lr` before `learning_rate`: Named has both (lr from Regression).
  CHECK(model->lr == *suggestion);
  CHECK(model->learning_rate == 0.01f);
}

TEST_CASE("tuner: lr_find puts the model and its optimizer back bit for bit") {
  auto model = std::make_shared<Regression>(/*keep_optimizer=*/true);
  const auto batches = regression_batches();
  // One step first, so the optimizer has state (exp_avg, exp_avg_sq, step) to keep.
  model->adam->zero_grad();
  torch::nn::functional::mse_loss(model->linear->forward(batches[0].data), batches[0].target).backward();
  model->adam->step();
  model->adam->zero_grad();
  std::vector<torch::Tensor> parameters, buffers, optimizer_state;
  for (const auto& p : model->parameters()) parameters.push_back(p.detach().clone());
  for (const auto& b : model->buffers()) buffers.push_back(b.detach().clone());
  for (const auto& p : model->parameters()) {
    const auto& state = static_cast<torch::optim::AdamParamState&>(*model->adam->state().at(volt::compat::optimizer_state_key(p)));
    optimizer_state.push_back(state.exp_avg().clone());
    optimizer_state.push_back(state.exp_avg_sq().clone());
    CHECK(state.step() == 1);
  }
  const auto result = volt::lr_find<volt::CPU, volt::SingleDevice, volt::FP32>(
      quiet(), model, batches, {.num_training = 30, .update_attr = false});
  CHECK(result.losses.size() == 30);
  CHECK(model->steps == 30);
  CHECK(model->lr == 1e-3);  // update_attr off
  const auto now = model->parameters();
  REQUIRE(now.size() == parameters.size());
  for (std::size_t i = 0; i < now.size(); ++i) {
    CHECK(torch::equal(now[i], parameters[i]));
    CHECK_FALSE(now[i].grad().defined());
  }
  CHECK(torch::equal(model->buffers()[0], buffers[0]));  // `seen` counted 30 batches, then was put back
  REQUIRE(model->adam->param_groups().size() == 1);
  CHECK(model->adam->param_groups()[0].options().get_lr() == 1e-3);
  std::size_t k = 0;
  for (const auto& p : model->parameters()) {
    const auto& state = static_cast<torch::optim::AdamParamState&>(*model->adam->state().at(volt::compat::optimizer_state_key(p)));
    CHECK(state.step() == 1);
    CHECK(torch::equal(state.exp_avg(), optimizer_state[k++]));
    CHECK(torch::equal(state.exp_avg_sq(), optimizer_state[k++]));
  }
}

TEST_CASE("tuner: lr_find restores the model when the fit throws") {
  struct Failing : Regression {
    torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t i, volt::StepContext& ctx) {
      if (i == 5) throw std::runtime_error("boom at batch 5");
      return Regression::training_step(batch, i, ctx);
    }
  };
  auto model = std::make_shared<Failing>();
  const auto before = model->linear->weight.detach().clone();
  VOLT_CHECK_THROWS_CONTAINS((volt::lr_find<volt::CPU, volt::SingleDevice, volt::FP32>(
                                 quiet(), model, regression_batches(), {.min_lr = 1e-2, .num_training = 10})),
                             std::runtime_error, "boom at batch 5");
  CHECK(model->steps == 5);
  CHECK(torch::equal(model->linear->weight, before));
}

TEST_CASE("tuner: lr_find on CUDA sweeps the CPU's curve and puts the model back (CUDA)") {
  if (!torch::cuda::is_available()) {
    MESSAGE("skipped: no CUDA device (torch::cuda::is_available() is false)");
    return;
  }
  const volt::LRFinderOptions sweep{.min_lr = 1e-5, .max_lr = 1.0, .num_training = 40, .update_attr = false};
  auto run = [&](auto accelerator) {
    using A = decltype(accelerator);
    torch::manual_seed(11);
    auto model = std::make_shared<Regression>();
    std::vector<torch::Tensor> initial;
    for (const auto& p : model->parameters()) initial.push_back(p.detach().cpu().clone());
    const auto result = volt::lr_find<A, volt::SingleDevice, volt::FP32>(quiet(), model, regression_batches(), sweep);
    std::vector<torch::Tensor> after;
    for (const auto& p : model->parameters()) after.push_back(p.detach().cpu().clone());
    const auto device = model->parameters().front().device();
    return std::make_tuple(result, initial, after, device);
  };
  const auto [cpu, cpu_initial, cpu_after, cpu_device] = run(volt::CPU{});
  const auto [cuda, cuda_initial, cuda_after, cuda_device] = run(volt::CUDA{});
  CHECK(cpu_device.is_cpu());
  CHECK(cuda_device.is_cuda());  // the model stays on the device, as after fit
  REQUIRE(cuda.losses.size() == cpu.losses.size());
  CHECK(cuda.lrs == cpu.lrs);
  CHECK(cuda.stopped_early == cpu.stopped_early);
  double largest = 0.0;
  for (std::size_t i = 0; i < cpu.losses.size(); ++i) {
    largest = std::max(largest, std::abs(cuda.losses[i] - cpu.losses[i]) / std::max(1e-12, std::abs(cpu.losses[i])));
  }
  MESSAGE("largest relative difference of the CUDA sweep's losses from the CPU's: " << largest);
  CHECK(largest < 1e-3);
  CHECK(cuda.suggestion() == cpu.suggestion());
  for (std::size_t i = 0; i < cuda_initial.size(); ++i) {
    CHECK(torch::equal(cuda_initial[i], cpu_initial[i]));
    CHECK(torch::equal(cuda_after[i], cuda_initial[i]));  // put back bit for bit
  }
}

TEST_CASE("tuner: lr_find refuses bad options with what was given and what is allowed") {
  auto model = std::make_shared<Regression>();
  const auto data = regression_batches();
  auto find = [&](volt::LRFinderOptions options) {
    return volt::lr_find<volt::CPU, volt::SingleDevice, volt::FP32>(quiet(), model, data, options);
  };
  VOLT_CHECK_THROWS_CONTAINS(find({.mode = "cosine"}), volt::MisconfigurationError,
                             "mode should be either `linear` or `exponential`; got `cosine`");
  VOLT_CHECK_THROWS_CONTAINS(find({.num_training = 0}), volt::MisconfigurationError, "num_training must be >= 1; got 0");
  VOLT_CHECK_THROWS_CONTAINS(find({.min_lr = 0}), volt::MisconfigurationError,
                             "needs finite 0 < min_lr < max_lr (mode `exponential`); got min_lr=0, max_lr=1");
  VOLT_CHECK_THROWS_CONTAINS(find({.min_lr = 2, .max_lr = 1, .mode = "linear"}), volt::MisconfigurationError,
                             "0 <= min_lr < max_lr (mode `linear`); got min_lr=2, max_lr=1");
  VOLT_CHECK_THROWS_CONTAINS(find({.early_stop_threshold = -1.0}), volt::MisconfigurationError,
                             "early_stop_threshold must be > 0 or std::nullopt (no early stop); got -1");
  CHECK(model->steps == 0);

  struct NoLr : torch::nn::Module {
    NoLr() { register_module("linear", linear); }
    torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t, volt::StepContext&) {
      return torch::nn::functional::mse_loss(linear->forward(batch.data), batch.target);
    }
    volt::OptimizerConfig configure_optimizers() {
      return {std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(0.1))};
    }
    torch::nn::Linear linear{4, 1};
  };
  auto no_lr = std::make_shared<NoLr>();
  VOLT_CHECK_THROWS_CONTAINS((volt::lr_find<volt::CPU, volt::SingleDevice, volt::FP32>(quiet(), no_lr, data)),
                             volt::MisconfigurationError, "should have one of these fields: ('lr', 'learning_rate')");
  CHECK(volt::lr_find<volt::CPU, volt::SingleDevice, volt::FP32>(quiet(), no_lr, data,
                                                                   {.num_training = 12, .update_attr = false})
            .losses.size() == 12);

  VOLT_CHECK_THROWS_CONTAINS((volt::lr_find<volt::CPU, volt::DDP, volt::FP32>({.devices = 2}, model, data)),
                             std::invalid_argument, "lr_find runs on one device");

  volt::TrainerOptions dev_run = quiet();
  dev_run.fast_dev_run = 1;
  volt_test::CaptureLog log;
  CHECK(volt::lr_find<volt::CPU, volt::SingleDevice, volt::FP32>(dev_run, model, data).lrs.empty());
  CHECK(log.warned("Skipping learning rate finder since `fast_dev_run` is enabled."));
  CHECK(model->steps == 0);
}

TEST_CASE("tuner: the lr_find plot is an SVG file with the curve and the suggestion") {
  const auto curve = result_of("exponential", recorded::exponential_lrs, recorded::exponential_losses);
  const volt_test::TempDir dir;
  const auto& folder = dir.path;
  const auto path = folder / "lr_find.svg";
  curve.write_svg(path);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const std::string svg = text.str();
  CHECK(svg.rfind("<?xml", 0) == 0);
  CHECK(svg.find("<svg xmlns=\"http://www.w3.org/2000/svg\"") != std::string::npos);
  CHECK(svg.find("</svg>") != std::string::npos);
  CHECK(svg.find("Learning rate (log scale)") != std::string::npos);
  CHECK(svg.find(">1e-08<") != std::string::npos);  // a tick label of the log axis
  // The curve: one "x,y" pair per point, all inside the picture; x grows with the learning rate.
  const auto start = svg.find("points=\"");
  REQUIRE(start != std::string::npos);
  std::istringstream points(svg.substr(start + 8, svg.find('"', start + 8) - start - 8));
  std::vector<std::pair<double, double>> xy;
  for (std::string pair; points >> pair;) {
    const auto comma = pair.find(',');
    xy.emplace_back(std::stod(pair.substr(0, comma)), std::stod(pair.substr(comma + 1)));
  }
  CHECK(xy.size() == recorded::exponential_lrs.size());
  for (std::size_t i = 0; i < xy.size(); ++i) {
    CHECK(xy[i].first >= 0);
    CHECK(xy[i].first <= 640);
    CHECK(xy[i].second >= 0);
    CHECK(xy[i].second <= 440);
    if (i > 0) CHECK(xy[i].first > xy[i - 1].first);
  }
  CHECK(svg.find("class=\"suggestion\"") != std::string::npos);
  CHECK(svg.find("suggested learning rate 1.096e-07") != std::string::npos);
  // Without a suggestion (too few points) there is no marker; no temporary file is left behind.
  result_of("linear", {0.1, 0.2}, {1, 2}).write_svg(path);
  std::ifstream again(path);
  std::stringstream second;
  second << again.rdbuf();
  CHECK(second.str().find("class=\"suggestion\"") == std::string::npos);
  CHECK(second.str().find("Learning rate<") != std::string::npos);
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(folder)) ++files;
  CHECK(files == 1);
  VOLT_CHECK_THROWS_CONTAINS(curve.write_svg(folder / "missing" / "plot.svg"), std::runtime_error,
                             "could not write the learning-rate finder plot");
}

#include "test_common.hpp"

#include "trainer/trainer_fixtures.hpp"

#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

// TrainerOptions::cuda_graphs: what makes fit() decline the capture (checked everywhere), and on a GPU the
// captured step against the eager one: the same losses and weights, a short last batch run eagerly between
// replays, the grad scaler, clipping and a scheduler inside the graph, a failing capture falling back.
namespace {

bool no_cuda() {
  if (torch::cuda::is_available()) return false;
  MESSAGE("skipped: no CUDA device (torch::cuda::is_available() is false)");
  return true;
}

/// Records each training step's loss as a number.
struct LossRecorder {
  std::shared_ptr<std::vector<double>> losses = std::make_shared<std::vector<double>>();
  void on_train_batch_end(volt::TrainerState&, const torch::Tensor& loss, std::int64_t) {
    losses->push_back(loss.item<double>());
  }
};

/// A callback whose hook runs between backward and the optimizer step.
struct GradientPeeker {
  void on_after_backward(volt::TrainerState&) {}
};

/// An MLP classifier whose optimizer, scheduler and logging vary by test.
struct GraphClassifier : torch::nn::Module {
  torch::nn::Linear fc1{torch::nn::Linear(8, 32)};
  torch::nn::Linear fc2{torch::nn::Linear(32, 3)};
  std::string optimizer_kind = "adam";
  bool with_scheduler = false;
  bool sync_in_step = false;  // reads the loss on the host inside training_step: not capturable
  GraphClassifier() {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc2->forward(torch::relu(fc1->forward(x))); }
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t, volt::StepContext& ctx) {
    auto loss = torch::nn::functional::cross_entropy(forward(batch.data), batch.target);
    if (sync_in_step && loss.item<double>() < 0) loss = loss * 2;
    ctx.log("train_loss", loss, {.on_step = true, .on_epoch = true});
    return loss;
  }
  volt::OptimizerConfig configure_optimizers() {
    std::shared_ptr<torch::optim::Optimizer> optimizer;
    if (optimizer_kind == "adam") {
      optimizer = std::make_shared<torch::optim::Adam>(parameters(), torch::optim::AdamOptions(1e-2));
    } else if (optimizer_kind == "adamw") {
      optimizer = std::make_shared<torch::optim::AdamW>(parameters(), torch::optim::AdamWOptions(1e-2).weight_decay(0.1));
    } else if (optimizer_kind == "sgd") {
      optimizer = std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
    } else {
      optimizer = std::make_shared<torch::optim::RMSprop>(parameters(), torch::optim::RMSpropOptions(1e-2));
    }
    if (!with_scheduler) return {optimizer};
    return {optimizer, std::make_shared<torch::optim::StepLR>(*optimizer, 1, 0.5), volt::SchedulerInterval::epoch};
  }
};

/// 10 batches of 16 and a last batch of 5 (a short last batch, as a DataLoader without drop_last makes).
volt_test::Batches batches_with_short_tail() {
  auto batches = volt_test::make_classification_batches(10, 16);
  torch::manual_seed(99);
  batches.emplace_back(torch::randn({5, 8}), torch::randint(0, 3, {5}, torch::kLong));
  return batches;
}

struct RunResult {
  std::vector<double> losses;
  std::vector<torch::Tensor> weights;
  std::int64_t replays = 0;
  std::int64_t eager_after_capture = 0;
  std::int64_t global_step = 0;
  std::optional<double> epoch_loss;
  std::vector<std::string> warnings;
};

template <class Precision = volt::FP32>
RunResult train(bool graphs, const std::string& optimizer_kind, bool scheduler, std::optional<double> clip,
                bool sync_in_step = false) {
  volt_test::TempDir dir;
  auto options = volt_test::quiet_options(dir);
  options.max_epochs = 3;
  options.cuda_graphs = graphs;
  options.gradient_clip_val = clip;
  torch::manual_seed(21);
  auto model = std::make_shared<GraphClassifier>();
  model->optimizer_kind = optimizer_kind;
  model->with_scheduler = scheduler;
  model->sync_in_step = sync_in_step;
  LossRecorder recorder;
  volt_test::CaptureLog log;
  volt::Trainer<volt::CUDA, volt::SingleDevice, Precision> trainer(options, recorder);
  trainer.fit(model, batches_with_short_tail());
  RunResult result;
  result.losses = *recorder.losses;
  for (const auto& parameter : model->parameters()) result.weights.push_back(parameter.detach().cpu());
  result.replays = trainer.cuda_graph_replays();
  result.eager_after_capture = trainer.cuda_graph_eager_steps();
  result.global_step = trainer.global_step();
  const auto metrics = trainer.callback_metrics();
  if (auto found = metrics.find("train_loss_epoch"); found != metrics.end()) result.epoch_loss = found->second;
  result.warnings = log.warnings;
  return result;
}

void check_same_training(const RunResult& graph, const RunResult& eager, double tolerance) {
  REQUIRE(graph.losses.size() == eager.losses.size());
  double largest_loss_difference = 0;
  for (std::size_t i = 0; i < graph.losses.size(); ++i) {
    largest_loss_difference = std::max(largest_loss_difference, std::abs(graph.losses[i] - eager.losses[i]));
  }
  double largest_weight_difference = 0;
  for (std::size_t i = 0; i < graph.weights.size(); ++i) {
    largest_weight_difference =
        std::max(largest_weight_difference, (graph.weights[i] - eager.weights[i]).abs().max().item<double>());
  }
  INFO("largest loss difference " << largest_loss_difference << ", largest weight difference "
                                  << largest_weight_difference);
  CHECK(largest_loss_difference <= tolerance);
  CHECK(largest_weight_difference <= tolerance);
  CHECK(graph.global_step == eager.global_step);
  REQUIRE(graph.epoch_loss.has_value());
  REQUIRE(eager.epoch_loss.has_value());
  CHECK(*graph.epoch_loss == doctest::Approx(*eager.epoch_loss).epsilon(tolerance));
}

}  // namespace

TEST_CASE("cuda_graphs: fit() names every reason it cannot capture and trains eagerly") {
  volt_test::TempDir dir;
  auto options = volt_test::quiet_options(dir);
  options.max_epochs = 1;
  options.cuda_graphs = true;
  options.accumulate_grad_batches = 2;
  options.error_on_nonfinite_loss = true;
  auto model = std::make_shared<GraphClassifier>();
  model->optimizer_kind = "rmsprop";
  volt_test::CaptureLog log;
  volt::Trainer<volt::CPU> trainer(options, GradientPeeker{});
  trainer.fit(model, volt_test::make_classification_batches(4, 8));
  CHECK(trainer.global_step() == 2);
  CHECK(trainer.cuda_graph_replays() == 0);
  REQUIRE(log.warned("cuda_graphs=true, but the training step cannot be captured: "));
  CHECK(log.warned("the device is cpu, not cuda"));
  CHECK(log.warned("accumulate_grad_batches is 2 (a captured step is one whole optimizer step)"));
  CHECK(log.warned("error_on_nonfinite_loss reads the loss on the host at every step"));
  CHECK(log.warned("GradientPeeker has on_after_backward, which runs inside the step"));
  CHECK(log.warned("the optimizer is torch::optim::RMSprop"));
  CHECK(log.warned(". Training eagerly."));
  if constexpr (!volt::detail::cuda_graphs_compiled) CHECK(log.warned("this build cannot capture CUDA graphs"));
}

TEST_CASE("cuda_graphs: a CPU run with the option trains exactly as one without it") {
  auto run = [](bool graphs) {
    volt_test::TempDir dir;
    auto options = volt_test::quiet_options(dir);
    options.max_epochs = 2;
    options.cuda_graphs = graphs;
    torch::manual_seed(3);
    auto model = std::make_shared<GraphClassifier>();
    volt::Trainer<volt::CPU> trainer(options);
    trainer.fit(model, volt_test::make_classification_batches(5, 8));
    return model->fc1->weight.detach().clone();
  };
  CHECK(torch::equal(run(true), run(false)));
}

TEST_CASE("cuda_graphs: cuda_graph_warmup_steps must be positive") {
  VOLT_CHECK_THROWS_CONTAINS(volt::Trainer<volt::CPU>({.cuda_graph_warmup_steps = 0}), volt::MisconfigurationError,
                             "`cuda_graph_warmup_steps` must be >= 1. Got 0.");
}

TEST_CASE("cuda_graphs: logged values recorded during a capture are logged again after each replay") {
  volt::detail::MetricStore store;
  std::vector<volt::detail::RecordedLog> calls;
  auto value = torch::tensor(2.0F);
  store.record_into(&calls);
  store.log("loss", value, {.on_step = true, .on_epoch = true}, volt::MetricPhase::train);
  store.record_into(nullptr);
  REQUIRE(calls.size() == 1);
  CHECK(store.callback_metrics().empty());  // recording logs nothing by itself
  store.replay(calls);
  value.fill_(4.0F);  // the graph rewrites its tensor; the next replay logs the new value
  store.replay(calls);
  const auto epoch = store.end_epoch(volt::MetricPhase::train);
  CHECK(epoch.at("loss_epoch") == doctest::Approx(3.0));
  CHECK(store.metric("loss_step").value() == doctest::Approx(4.0));
}

TEST_CASE("cuda_graphs: a batch's tensors are compared by shape, dtype and device") {
  using volt::detail::same_tensor_shapes;
  using volt::detail::tensor_leaves;
  const torch::data::Example<> a{torch::zeros({4, 3}), torch::zeros({4}, torch::kLong)};
  const torch::data::Example<> b{torch::ones({4, 3}), torch::ones({4}, torch::kLong)};
  const torch::data::Example<> shorter{torch::ones({2, 3}), torch::ones({2}, torch::kLong)};
  const torch::data::Example<> other_dtype{torch::ones({4, 3}), torch::ones({4}, torch::kInt)};
  CHECK(tensor_leaves(a).size() == 2);
  CHECK(same_tensor_shapes(tensor_leaves(a), tensor_leaves(b)));
  CHECK_FALSE(same_tensor_shapes(tensor_leaves(a), tensor_leaves(shorter)));
  CHECK_FALSE(same_tensor_shapes(tensor_leaves(a), tensor_leaves(other_dtype)));
}

TEST_CASE("CUDA: a captured step trains as the eager one (FP32 Adam; AdamW with clipping and a scheduler)") {
  if (no_cuda()) return;
  SUBCASE("Adam") {
    const auto eager = train(false, "adam", false, std::nullopt);
    const auto graph = train(true, "adam", false, std::nullopt);
    // 3 epochs of 11 batches: 3 eager warm-up steps, then every batch of 16 replayed (the first right after its
    // capture) and the 3 short last batches eager.
    CHECK(graph.replays == 33 - 3 - 3);
    CHECK(graph.eager_after_capture == 3);
    check_same_training(graph, eager, 2e-5);
  }
  SUBCASE("AdamW, clipping by norm, StepLR every epoch") {
    const auto eager = train(false, "adamw", true, 0.05);
    const auto graph = train(true, "adamw", true, 0.05);
    CHECK(graph.replays == 27);
    check_same_training(graph, eager, 2e-5);
  }
}

TEST_CASE("CUDA: a captured step trains as the eager one (BF16Autocast SGD; FP16Autocast with the grad scaler)") {
  if (no_cuda()) return;
  SUBCASE("BF16Autocast, SGD with momentum") {
    const auto eager = train<volt::BF16Autocast>(false, "sgd", false, std::nullopt);
    const auto graph = train<volt::BF16Autocast>(true, "sgd", false, std::nullopt);
    CHECK(graph.replays == 27);
    check_same_training(graph, eager, 2e-3);
  }
  SUBCASE("FP16Autocast, Adam, clipping") {
    const auto eager = train<volt::FP16Autocast>(false, "adam", false, 1.0);
    const auto graph = train<volt::FP16Autocast>(true, "adam", false, 1.0);
    CHECK(graph.replays == 27);
    check_same_training(graph, eager, 2e-3);
  }
}

TEST_CASE("CUDA: a training step that cannot be captured falls back to eager with a message") {
  if (no_cuda()) return;
  const auto eager = train(false, "adam", false, std::nullopt, /*sync_in_step=*/true);
  const auto graph = train(true, "adam", false, std::nullopt, /*sync_in_step=*/true);
  CHECK(graph.replays == 0);
  bool warned = false;
  for (const auto& warning : graph.warnings) {
    warned |= warning.find("cuda_graphs: capturing the training step failed (") != std::string::npos;
  }
  CHECK(warned);
  check_same_training(graph, eager, 1e-6);
  // The failed capture left the device's random number generator usable (LibTorch marks it as capturing until
  // a capture ends cleanly).
  CHECK_NOTHROW((void)torch::randn({4}, torch::Device(torch::kCUDA, 0)));
  CHECK_NOTHROW((void)torch::dropout(torch::ones({8}, torch::Device(torch::kCUDA, 0)), 0.5, true));
}

// Small models, data and recording callbacks shared by the Trainer tests.
#pragma once

#include <torch/torch.h>

#include <volt/volt.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace volt_test {

using Batches = std::vector<torch::data::Example<>>;

/// A fresh folder under the system temp dir, removed at scope exit.
struct TempDir {
  TempDir() {
    std::random_device entropy;
    path = std::filesystem::temp_directory_path() / ("volt-test-" + std::to_string(entropy()));
    std::filesystem::create_directories(path);
  }
  // Removes the tree with the C library rather than std::filesystem::remove_all: PyPI's LibTorch 2.11
  // (libtorch.so) exports its own copies of the std::filesystem operations, and its remove_all crashes on a
  // non-empty folder.
  ~TempDir() {
    std::vector<std::filesystem::path> entries;
    std::error_code error;
    for (auto it = std::filesystem::recursive_directory_iterator(path, error);
         !error && it != std::filesystem::recursive_directory_iterator(); it.increment(error)) {
      entries.push_back(it->path());
    }
    std::sort(entries.begin(), entries.end(),
              [](const auto& a, const auto& b) { return a.native().size() > b.native().size(); });
    for (const auto& entry : entries) std::remove(entry.c_str());
    std::remove(path.c_str());
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::filesystem::path path;
};

/// Options without progress bar, summary, checkpointing or logger, rooted in `dir`.
inline volt::TrainerOptions quiet_options(const TempDir& dir) {
  volt::TrainerOptions options;
  options.max_epochs = 1;
  options.default_root_dir = dir.path.string();
  options.enable_progress_bar = false;
  options.enable_checkpointing = false;
  options.enable_model_summary = false;
  options.logger = false;
  return options;
}

/// `count` regression batches of 4 samples with 2 features (deterministic values).
inline Batches make_batches(int count) {
  Batches batches;
  for (int i = 0; i < count; ++i) {
    auto x = torch::arange(8, torch::kFloat).reshape({4, 2}) * 0.1 + i;
    batches.emplace_back(x, x.sum(1, true) * 0.5 - 1.0);
  }
  return batches;
}

/// `count` classification batches of `batch_size` samples, 8 features, 3 classes (fixed seed).
inline Batches make_classification_batches(int count, int batch_size) {
  torch::manual_seed(1234);
  Batches batches;
  for (int i = 0; i < count; ++i) {
    auto x = torch::randn({batch_size, 8});
    batches.emplace_back(x, torch::randint(0, 3, {batch_size}, torch::kLong));
  }
  return batches;
}

/// Iterates a batch list in an order drawn from LibTorch's default CPU generator when begin() is called,
/// like a torch::data RandomSampler.
struct ShuffledData {
  const Batches* data;
  struct Iterator {
    using iterator_category = std::input_iterator_tag;
    using value_type = torch::data::Example<>;
    using difference_type = std::ptrdiff_t;
    using pointer = const value_type*;
    using reference = const value_type&;
    const Batches* data = nullptr;
    std::shared_ptr<std::vector<std::int64_t>> order;
    std::size_t position = 0;
    reference operator*() const { return (*data)[static_cast<std::size_t>((*order)[position])]; }
    Iterator& operator++() {
      ++position;
      return *this;
    }
    bool operator==(const Iterator& other) const { return position == other.position; }
  };
  Iterator begin() const {
    auto permutation = torch::randperm(static_cast<std::int64_t>(data->size()), torch::kLong);
    auto order = std::make_shared<std::vector<std::int64_t>>(permutation.data_ptr<std::int64_t>(),
                                                             permutation.data_ptr<std::int64_t>() + permutation.numel());
    return Iterator{data, std::move(order), 0};
  }
  Iterator end() const { return Iterator{data, nullptr, data->size()}; }
};

struct Regressor : torch::nn::Module {
  torch::nn::Linear linear{torch::nn::Linear(2, 1)};
  Regressor() { register_module("linear", linear); }
  torch::Tensor forward(const torch::Tensor& x) { return linear->forward(x); }
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t) {
    return torch::mse_loss(forward(batch.data), batch.target);
  }
  void validation_step(const torch::data::Example<>& batch, std::int64_t, volt::StepContext& ctx) {
    ctx.log("val_loss", torch::mse_loss(forward(batch.data), batch.target));
  }
  std::shared_ptr<torch::optim::Adam> configure_optimizers() {
    return std::make_shared<torch::optim::Adam>(parameters(), torch::optim::AdamOptions(1e-2));
  }
};

struct SgdRegressor : Regressor {
  torch::Tensor initial_bias = linear->bias.detach().clone();
  std::shared_ptr<torch::optim::SGD> configure_optimizers() {
    return std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(1.0));
  }
};

struct ScheduledModel : Regressor {
  volt::SchedulerInterval interval = volt::SchedulerInterval::epoch;
  std::shared_ptr<torch::optim::SGD> optimizer;
  volt::OptimizerConfig configure_optimizers() {
    optimizer = std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(1.0));
    return {optimizer, std::make_shared<torch::optim::StepLR>(*optimizer, 1, 0.5), interval};
  }
};

struct HeldRegressorImpl : Regressor {};
TORCH_MODULE(HeldRegressor);

struct Classifier : torch::nn::Module {
  torch::nn::Linear fc1{torch::nn::Linear(8, 16)};
  torch::nn::Dropout dropout{nullptr};
  torch::nn::Linear fc2{torch::nn::Linear(16, 3)};
  explicit Classifier(double p = 0.0) : dropout(torch::nn::Dropout(p)) {
    register_module("fc1", fc1);
    register_module("dropout", dropout);
    register_module("fc2", fc2);
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc2->forward(dropout->forward(torch::relu(fc1->forward(x)))); }
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t, volt::StepContext& ctx) {
    auto loss = torch::nn::functional::cross_entropy(forward(batch.data), batch.target);
    ctx.log("train_loss", loss, {.prog_bar = true});
    return loss;
  }
  volt::OptimizerConfig configure_optimizers() {
    auto optimizer = std::make_shared<torch::optim::Adam>(parameters(), torch::optim::AdamOptions(1e-2));
    return {optimizer, std::make_shared<torch::optim::StepLR>(*optimizer, 1, 0.7)};
  }
};

/// Classifier with a plain Adam optimizer and no scheduler, for comparisons with hand-written loops.
struct PlainClassifier : Classifier {
  std::shared_ptr<torch::optim::Adam> configure_optimizers() {
    return std::make_shared<torch::optim::Adam>(parameters(), torch::optim::AdamOptions(1e-2));
  }
};

/// Records what happens around its validation and training steps.
struct CountingModel : Regressor {
  int validation_batches = 0;
  std::vector<std::int64_t> validation_runs_at_batch;
  std::vector<std::int64_t> validation_epochs;
  bool saw_training_in_validation = false;
  bool saw_grad_mode_in_validation = false;
  bool constant_val_metric = false;
  bool nan_val_metric = false;
  std::vector<double> val_metric_by_epoch;
  std::int64_t throw_at_batch = -1;

  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t batch_idx, volt::StepContext& ctx) {
    if (batch_idx == throw_at_batch) throw std::runtime_error("boom at batch " + std::to_string(batch_idx));
    auto loss = torch::mse_loss(forward(batch.data), batch.target);
    ctx.log("loss", loss, {.prog_bar = true});
    ctx.log("batch_value", static_cast<double>(batch_idx) * 10.0, {.on_step = true, .on_epoch = true});
    return loss;
  }
  void on_validation_epoch_start(volt::StepContext& ctx) {
    const bool sanity = ctx.stage() == volt::Stage::sanity_checking;
    validation_runs_at_batch.push_back(sanity ? -1 : ctx.trainer().batch_idx);
    if (!sanity && ctx.stage() == volt::Stage::fitting) validation_epochs.push_back(ctx.current_epoch());
  }
  void validation_step(const torch::data::Example<>&, std::int64_t batch_idx, volt::StepContext& ctx) {
    ++validation_batches;
    saw_training_in_validation |= is_training();
    saw_grad_mode_in_validation |= torch::GradMode::is_enabled();
    ctx.log("val_index", static_cast<double>(batch_idx), {.prog_bar = true});
    ctx.log("val_constant", nan_val_metric ? std::numeric_limits<double>::quiet_NaN() : 1.0);
    if (!val_metric_by_epoch.empty()) {
      ctx.log("val_score", val_metric_by_epoch[static_cast<std::size_t>(ctx.current_epoch()) % val_metric_by_epoch.size()]);
    }
  }
  void test_step(const torch::data::Example<>&, std::int64_t batch_idx, volt::StepContext& ctx) {
    ctx.log("test_index", static_cast<double>(batch_idx));
  }
  torch::Tensor predict_step(const torch::data::Example<>& batch) { return forward(batch.data); }
};

/// Records at which batch the optimizer steps and the gradient it steps with.
struct StepRecorder {
  std::shared_ptr<std::vector<std::int64_t>> steps_at_batch = std::make_shared<std::vector<std::int64_t>>();
  std::shared_ptr<std::vector<torch::Tensor>> grads_before_step = std::make_shared<std::vector<torch::Tensor>>();
  struct Callback {
    StepRecorder* owner;
    void on_before_optimizer_step(volt::TrainerState& state, torch::optim::Optimizer& optimizer) {
      owner->steps_at_batch->push_back(state.batch_idx);
      owner->grads_before_step->push_back(optimizer.param_groups()[0].params()[0].grad().clone());
    }
  };
  Callback callback() { return Callback{this}; }
};

/// Records the names of the hooks called; stops training at a given global step.
struct HookOrder {
  std::shared_ptr<std::vector<std::string>> events = std::make_shared<std::vector<std::string>>();
  struct Callback {
    std::shared_ptr<std::vector<std::string>> events;
    std::int64_t stop_at_step;
    void add(const char* name) { events->emplace_back(name); }
    void setup(volt::TrainerState&) { add("setup"); }
    void teardown(volt::TrainerState&) { add("teardown"); }
    void on_fit_start(volt::TrainerState&) { add("on_fit_start"); }
    void on_fit_end(volt::TrainerState&) { add("on_fit_end"); }
    void on_sanity_check_start(volt::TrainerState&) { add("on_sanity_check_start"); }
    void on_sanity_check_end(volt::TrainerState&) { add("on_sanity_check_end"); }
    void on_train_start(volt::TrainerState&) { add("on_train_start"); }
    void on_train_end(volt::TrainerState&) { add("on_train_end"); }
    void on_train_epoch_start(volt::TrainerState&) { add("on_train_epoch_start"); }
    void on_train_epoch_end(volt::TrainerState&) { add("on_train_epoch_end"); }
    void on_train_batch_start(volt::TrainerState&, std::int64_t) { add("on_train_batch_start"); }
    bool on_train_batch_end(volt::TrainerState& state, const torch::Tensor&, std::int64_t) {
      add("on_train_batch_end");
      return state.global_step == stop_at_step;
    }
    void on_validation_start(volt::TrainerState&) { add("on_validation_start"); }
    void on_validation_end(volt::TrainerState&) { add("on_validation_end"); }
    void on_before_zero_grad(volt::TrainerState&) { add("on_before_zero_grad"); }
    void on_before_backward(volt::TrainerState&, const torch::Tensor&) { add("on_before_backward"); }
    void on_after_backward(volt::TrainerState&) { add("on_after_backward"); }
    void on_before_optimizer_step(volt::TrainerState&, torch::optim::Optimizer&) { add("on_before_optimizer_step"); }
    void on_exception(volt::TrainerState&, const std::exception_ptr&) { add("on_exception"); }
  };
  Callback callback(std::int64_t stop_at_step) { return Callback{events, stop_at_step}; }
};

}  // namespace volt_test

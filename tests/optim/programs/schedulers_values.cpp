// Prints the learning rates (and the momentum, for OneCycleLR) of volt::optim's schedulers after each step()
// for the cases of schedulers_vs_pytorch.py, which runs the same cases through torch.optim.lr_scheduler and
// compares. One line per case and step: "<case> <step> <value> <value> ...", values as %.17g.
#include <torch/torch.h>

#include <volt/volt.hpp>

#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace {

torch::Tensor parameter() { return torch::zeros({2}, torch::requires_grad()); }

void print(const std::string& name, std::int64_t step, const std::vector<double>& values) {
  std::printf("%s %lld", name.c_str(), static_cast<long long>(step));
  for (double value : values) std::printf(" %.17g", value);
  std::printf("\n");
}

double momentum_of(torch::optim::Optimizer& optimizer) {
  auto& options = optimizer.param_groups()[0].options();
  if (auto* sgd = dynamic_cast<torch::optim::SGDOptions*>(&options)) return sgd->momentum();
  if (auto* rmsprop = dynamic_cast<torch::optim::RMSpropOptions*>(&options)) return rmsprop->momentum();
  return std::get<0>(static_cast<torch::optim::AdamOptions&>(options).betas());
}

void run(const std::string& name, volt::optim::Scheduler& scheduler, torch::optim::Optimizer& optimizer, int steps,
         bool momentum = false) {
  for (int step = 0; step <= steps; ++step) {
    if (step > 0) scheduler.step();
    auto values = scheduler.last_lrs();
    if (momentum) values.push_back(momentum_of(optimizer));
    print(name, step, values);
  }
}

}  // namespace

int main() {
  {
    torch::optim::SGD sgd({parameter()}, torch::optim::SGDOptions(0.1));
    volt::optim::LambdaLR scheduler(sgd, [](std::int64_t epoch) { return std::pow(0.95, static_cast<double>(epoch)); });
    run("lambda", scheduler, sgd, 12);
  }
  {
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(std::vector<torch::Tensor>{parameter()}, std::make_unique<torch::optim::SGDOptions>(0.1));
    groups.emplace_back(std::vector<torch::Tensor>{parameter()}, std::make_unique<torch::optim::SGDOptions>(0.01));
    torch::optim::SGD sgd(groups, torch::optim::SGDOptions(0.1));
    volt::optim::LambdaLR scheduler(
        sgd, std::vector<volt::optim::LambdaLR::Lambda>{
                 [](std::int64_t epoch) { return 1.0 / static_cast<double>(epoch + 1); },
                 [](std::int64_t epoch) { return std::pow(0.9, static_cast<double>(epoch)); }});
    run("lambda_groups", scheduler, sgd, 8);
  }
  {
    torch::optim::SGD sgd({parameter()}, torch::optim::SGDOptions(0.1));
    volt::optim::LinearLR scheduler(sgd, 0.25, 1.0, 4);
    run("linear", scheduler, sgd, 8);
  }
  {
    torch::optim::SGD sgd({parameter()}, torch::optim::SGDOptions(0.1));
    volt::optim::LinearLR scheduler(sgd, 1.0, 0.0, 5);
    run("linear_down", scheduler, sgd, 7);
  }
  {
    torch::optim::SGD sgd({parameter()}, torch::optim::SGDOptions(0.1));
    volt::optim::CosineAnnealingLR scheduler(sgd, 6, 0.001);
    run("cosine", scheduler, sgd, 15);
  }
  {
    torch::optim::SGD sgd({parameter()}, torch::optim::SGDOptions(0.1).momentum(0.9));
    volt::optim::OneCycleLR scheduler(sgd, {.max_lr = 1.0, .total_steps = 20});
    run("onecycle", scheduler, sgd, 20, /*momentum=*/true);
  }
  {
    torch::optim::Adam adam({parameter()}, torch::optim::AdamOptions(0.1));
    volt::optim::OneCycleLR scheduler(adam, {.max_lr = 0.5, .total_steps = 15, .pct_start = 0.25,
                                             .anneal_strategy = "linear", .three_phase = true});
    run("onecycle_three_linear_adam", scheduler, adam, 15, /*momentum=*/true);
  }
  {
    torch::optim::RMSprop rmsprop({parameter()}, torch::optim::RMSpropOptions(0.1).momentum(0.9));
    volt::optim::OneCycleLR scheduler(rmsprop, {.max_lr = 0.3, .epochs = 3, .steps_per_epoch = 4, .pct_start = 0.4});
    run("onecycle_epochs_rmsprop", scheduler, rmsprop, 12, /*momentum=*/true);
  }
  {
    torch::optim::SGD sgd({parameter()}, torch::optim::SGDOptions(0.1));
    auto warmup = std::make_shared<volt::optim::LinearLR>(sgd, 0.1, 1.0, 3);
    auto cosine = std::make_shared<volt::optim::CosineAnnealingLR>(sgd, 5, 0.0);
    volt::optim::SequentialLR scheduler(sgd, {warmup, cosine}, {3});
    run("sequential", scheduler, sgd, 10);
  }
  {
    // ReduceLROnPlateau steps with a metric: a fixed sequence, both modes and threshold modes.
    const std::vector<double> metrics{5, 4, 4, 4.0001, 3.9999, 4, 4, 4, 2, 2, 2, 2, 2, 2};
    const std::vector<volt::optim::ReduceLROnPlateauOptions> cases{
        {.factor = 0.5, .patience = 1},
        {.mode = "max", .factor = 0.3, .patience = 0, .cooldown = 2},
        {.factor = 0.5, .patience = 2, .threshold = 0.5, .threshold_mode = "abs", .min_lr = 0.02}};
    for (std::size_t c = 0; c < cases.size(); ++c) {
      torch::optim::SGD sgd({parameter()}, torch::optim::SGDOptions(0.1));
      volt::optim::ReduceLROnPlateau scheduler(sgd, cases[c]);
      for (std::size_t step = 0; step <= metrics.size(); ++step) {
        if (step > 0) scheduler.step(metrics[step - 1]);
        print("plateau" + std::to_string(c), static_cast<std::int64_t>(step), scheduler.last_lrs());
      }
    }
  }
  return 0;
}

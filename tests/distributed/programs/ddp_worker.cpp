// A program trained with Trainer<CPU, DDP> for the multi-process tests (run by tests/distributed/run_ddp.sh).
//
//   ddp_worker equivalence {plain|accumulate|clip|manual|ema} [cuda]
//       2 ranks, batch 4 each, end with the same weights (within 1e-6; 1e-5 on CUDA) as one process with
//       batch 8; rank 0 prints "max |difference| = ..." and exits 1 when it is larger. "manual": the ranks
//       train with manual optimization (manual_backward must reduce the gradients), the one process with
//       automatic optimization; "ema": both with volt::WeightAveraging (an EMA), which fit leaves in the model.
//   ddp_worker datamodule DIR
//       the plain equivalence with the data given by a volt::DataModule: prepare_data runs on rank 0 only,
//       setup on both (each appends a line to DIR/calls.txt); rank 0 prints "datamodule calls: ..." and the
//       difference, and exits 1 when the calls or the weights are wrong.
//   ddp_worker fabric
//       Fabric<CPU, DDP> with 2 ranks and accumulation (no_backward_sync) against one process, plus collectives.
//   ddp_worker predict-first
//       Trainer<CPU, DDP>::predict before any fit, each process starting from other weights: it joins the
//       process group itself and every rank predicts with rank 0's weights (each prints a checksum).
//   ddp_worker fabric-save-fail PATH
//       Fabric<CPU, DDP>::save to PATH/model.ckpt where PATH is a regular file: rank 0's write fails, and
//       every rank must throw CheckpointError at once (rank 1 with rank 0's message), none left waiting.
//   ddp_worker trainer-save DIR BLOCKER
//       after fit, Trainer::save_checkpoint(DIR/model.ckpt) on both ranks: when it returns, every rank sees
//       the complete file; then a save under BLOCKER (a regular file) must throw CheckpointError on both ranks.
//   ddp_worker buffers
//       Trainer<CPU, DDP> on a model with BatchNorm, each rank on its own data: every training step prints
//       "step S start: ..." (the BatchNorm statistics when training_step begins, after the broadcast from rank 0)
//       and "step S after forward: ..."; the start lines must be alike on both ranks, the others not.
//   ddp_worker fail {throw|kill|exit|kill-node} RANK STEP [DEVICES NODES]
//       rank RANK throws / SIGKILLs itself / exits with status 3 / SIGKILLs its process group (the whole node,
//       when each node was started in a process group of its own) after global step STEP; the others must end
//       non-zero within a bounded time, naming the failed rank. DEVICES processes on each of NODES nodes
//       (default 2 on 1).
//   ddp_worker multinode DEVICES NODES
//       the plain equivalence with DEVICES processes on each of NODES nodes (the test starts each node with
//       NODE_RANK, torchrun's or SLURM's variables: tests/distributed/run_multinode.sh); every rank prints
//       "rank R of W on node N: global_step S", rank 0 the difference from one process with each step's batches
//       of all ranks joined.
// Launched as one process it starts the second itself (volt's launcher); with torchrun's variables it joins.
#include <torch/torch.h>

#include <volt/volt.hpp>

#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

namespace {

using Batches = std::vector<torch::data::Example<>>;

struct Regressor : torch::nn::Module {
  torch::nn::Linear first{nullptr}, second{nullptr};
  Regressor() {
    first = register_module("first", torch::nn::Linear(6, 16));
    second = register_module("second", torch::nn::Linear(16, 1));
  }
  torch::Tensor forward(const torch::Tensor& x) { return second->forward(torch::tanh(first->forward(x))); }
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t) {
    return torch::mse_loss(forward(batch.data), batch.target);
  }
  auto configure_optimizers() {
    return std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  }
};

/// A Regressor that steps its optimizer itself (manual optimization).
struct ManualRegressor : Regressor {
  static constexpr bool automatic_optimization = false;
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t, volt::StepContext& ctx) {
    auto& optimizer = ctx.optimizer();
    auto loss = torch::mse_loss(forward(batch.data), batch.target);
    optimizer.zero_grad();
    ctx.manual_backward(loss);
    optimizer.step();
    return loss;
  }
};

/// A Regressor that predicts.
struct Predictor : Regressor {
  torch::Tensor predict_step(const torch::data::Example<>& batch, std::int64_t) { return forward(batch.data); }
};

Batches make_batches(int count, int size, std::uint64_t seed = 99) {
  torch::manual_seed(seed);
  Batches batches;
  for (int i = 0; i < count; ++i) {
    auto x = torch::randn({size, 6});
    batches.emplace_back(x, x.sum(1, true).sin());
  }
  return batches;
}

/// Batches kj .. kj+k-1 of `small` joined: what one process sees with k times the batch size when k ranks
/// train on `small` (rank r gets batches r, r+k, ...).
Batches join_groups(const Batches& small, std::size_t k) {
  Batches joined;
  for (std::size_t i = 0; i + k <= small.size(); i += k) {
    std::vector<torch::Tensor> data, target;
    for (std::size_t j = i; j < i + k; ++j) {
      data.push_back(small[j].data);
      target.push_back(small[j].target);
    }
    joined.emplace_back(torch::cat(data), torch::cat(target));
  }
  return joined;
}

/// Batches 2j and 2j+1 of `small` joined: what one process sees with twice the batch size.
Batches join_pairs(const Batches& small) {
  Batches joined;
  for (std::size_t i = 0; i + 1 < small.size(); i += 2) {
    joined.emplace_back(torch::cat({small[i].data, small[i + 1].data}), torch::cat({small[i].target, small[i + 1].target}));
  }
  return joined;
}

volt::TrainerOptions options_for(const std::string& variant, int devices) {
  volt::TrainerOptions options;
  options.devices = devices;
  options.max_epochs = 3;
  options.enable_progress_bar = false;
  options.enable_checkpointing = false;
  options.enable_model_summary = false;
  options.logger = false;
  if (variant == "accumulate") options.accumulate_grad_batches = 2;
  if (variant == "clip") options.gradient_clip_val = 0.05;
  return options;
}

/// A Regressor with BatchNorm between its layers, which prints its statistics at each training step.
struct Normalized : torch::nn::Module {
  torch::nn::Linear first{nullptr}, second{nullptr};
  torch::nn::BatchNorm1d norm{nullptr};
  std::int64_t step = 0;
  Normalized() {
    first = register_module("first", torch::nn::Linear(6, 16));
    norm = register_module("norm", torch::nn::BatchNorm1d(16));
    second = register_module("second", torch::nn::Linear(16, 1));
  }
  std::string statistics() {
    std::ostringstream text;
    text << std::setprecision(17) << "mean " << norm->running_mean.sum().item<double>() << " var "
         << norm->running_var.sum().item<double>() << " tracked " << norm->num_batches_tracked.item<std::int64_t>();
    return text.str();
  }
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t) {
    std::cout << "step " << step << " start: " << statistics() << std::endl;
    auto loss = torch::mse_loss(second->forward(torch::tanh(norm->forward(first->forward(batch.data)))), batch.target);
    std::cout << "step " << step << " after forward: " << statistics() << std::endl;
    ++step;
    return loss;
  }
  auto configure_optimizers() {
    return std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  }
};

/// Trains Normalized with each rank on its own batches (see the file comment).
int buffers() {
  volt::Trainer<volt::CPU, volt::DDP> trainer(options_for("plain", 2));
  const auto mine = make_batches(4, 8, 100 + static_cast<std::uint64_t>(trainer.global_rank()));
  torch::manual_seed(5);
  auto model = std::make_shared<Normalized>();
  trainer.fit(model, volt::per_rank(mine));
  return trainer.global_step() == 12 ? 0 : 1;
}

/// Fails this rank after a given global step.
struct Saboteur {
  std::string how;
  int rank;
  std::int64_t step;
  void on_train_batch_end(volt::TrainerState& state, const torch::Tensor&, std::int64_t) const {
    if (state.global_rank != rank || state.global_step < step) return;
    if (how == "kill") std::raise(SIGKILL);
    if (how == "exit") std::_Exit(3);
    if (how == "kill-node") ::kill(0, SIGKILL);
    throw std::runtime_error("deliberate failure in rank " + std::to_string(rank) + " at step " +
                             std::to_string(state.global_step));
  }
};

/// The ranks train Model, the one process Regressor; both Trainers take `callbacks` (copied).
template <class Accelerator, class Model, class... Callbacks>
int equivalence_of(const std::string& variant, const Callbacks&... callbacks) {
  const auto small = make_batches(16, 4);
  torch::manual_seed(5);
  auto model = std::make_shared<Model>();
  volt::Trainer<Accelerator, volt::DDP> trainer(options_for(variant, 2), callbacks...);
  trainer.fit(model, small);
  std::cout << "rank " << trainer.global_rank() << " of " << trainer.world_size() << ": global_step "
            << trainer.global_step() << std::endl;
  if (trainer.global_rank() != 0) return 0;

  torch::manual_seed(5);
  auto reference = std::make_shared<Regressor>();
  volt::Trainer<Accelerator> single(options_for(variant, 1), callbacks...);
  const auto large = join_pairs(small);
  single.fit(reference, large);
  double worst = 0.0;
  const std::vector<torch::Tensor> a = model->parameters(), b = reference->parameters();
  for (std::size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, (a[i].cpu() - b[i].cpu()).abs().max().item<double>());
  }
  std::cout << "variant " << variant << ": global_step ddp " << trainer.global_step() << " single "
            << single.global_step() << "; max |difference| = " << worst << std::endl;
  bool same_steps = trainer.global_step() == single.global_step();
  if constexpr (sizeof...(Callbacks) > 0) {
    // The callbacks changed what fit leaves in the model (the EMA is not the last weights).
    torch::manual_seed(5);
    auto plain = std::make_shared<Regressor>();
    volt::Trainer<Accelerator> without(options_for(variant, 1));
    without.fit(plain, large);
    double apart = 0.0;
    const auto p = plain->parameters();
    for (std::size_t i = 0; i < a.size(); ++i) apart = std::max(apart, (a[i].cpu() - p[i].cpu()).abs().max().item<double>());
    std::cout << "variant " << variant << ": max |difference| from a fit without the callbacks = " << apart << std::endl;
    same_steps = same_steps && apart > 1e-3;
  }
  // CPU: the same sums in another order (1e-6); CUDA: also other kernels (cuBLAS, atomics): 1e-5.
  const double tolerance = std::is_same_v<Accelerator, volt::CUDA> ? 1e-5 : 1e-6;
  return worst <= tolerance && same_steps ? 0 : 1;
}

template <class Accelerator>
int equivalence(const std::string& variant) {
  if (variant == "manual") return equivalence_of<Accelerator, ManualRegressor>(variant);
  if (variant == "ema") {
    return equivalence_of<Accelerator, Regressor>(variant, volt::WeightAveraging({.avg_fn = volt::ema_average(0.8)}));
  }
  return equivalence_of<Accelerator, Regressor>(variant);
}

/// The equivalence batches as a data module that records its prepare_data and setup calls in a file.
struct RecordingData {
  std::filesystem::path calls;
  const volt::TrainerState* state = nullptr;
  void record(const std::string& what) const {
    std::ofstream(calls, std::ios::app) << what << " rank " << state->global_rank << "\n";
  }
  void prepare_data() { record("prepare_data"); }
  void setup(volt::Stage) { record("setup"); }
  Batches train_dataloader() const { return make_batches(16, 4); }
};

int datamodule(const std::filesystem::path& dir) {
  torch::manual_seed(5);
  auto model = std::make_shared<Regressor>();
  volt::Trainer<volt::CPU, volt::DDP> trainer(options_for("plain", 2));
  RecordingData data{dir / "calls.txt", &trainer.state()};
  trainer.fit(model, data);
  if (trainer.global_rank() != 0) return 0;
  std::ifstream file(data.calls);
  std::vector<std::string> lines;
  for (std::string line; std::getline(file, line);) lines.push_back(line);
  std::sort(lines.begin(), lines.end());
  std::string joined;
  for (const auto& line : lines) joined += (joined.empty() ? "" : ", ") + line;
  std::cout << "datamodule calls: " << joined << std::endl;
  const bool calls_ok = lines == std::vector<std::string>{"prepare_data rank 0", "setup rank 0", "setup rank 1"};

  torch::manual_seed(5);
  auto reference = std::make_shared<Regressor>();
  volt::Trainer<volt::CPU> single(options_for("plain", 1));
  single.fit(reference, join_pairs(make_batches(16, 4)));
  double worst = 0.0;
  const auto a = model->parameters(), b = reference->parameters();
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, (a[i] - b[i]).abs().max().item<double>());
  std::cout << "variant datamodule: global_step ddp " << trainer.global_step() << " single " << single.global_step()
            << "; max |difference| = " << worst << std::endl;
  return calls_ok && worst <= 1e-6 && trainer.global_step() == single.global_step() ? 0 : 1;
}

/// Fabric<CPU, DDP>: a hand loop with gradient accumulation over 2 micro-batches (no_backward_sync on the
/// first), against one process with the joined batches; also checks all_reduce, all_gather and broadcast.
int fabric() {
  const auto small = make_batches(16, 4);
  torch::manual_seed(5);
  auto model = std::make_shared<Regressor>();
  volt::Fabric<volt::CPU, volt::DDP> ddp({.devices = 2});
  auto optimizer = std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  std::tie(model, optimizer) = ddp.setup(model, optimizer);
  const int rank = ddp.global_rank();
  std::vector<torch::data::Example<>> mine;
  for (std::size_t i = static_cast<std::size_t>(rank); i < small.size(); i += 2) mine.push_back(small[i]);
  for (std::size_t i = 0; i + 1 < mine.size(); i += 2) {
    optimizer->zero_grad();
    {
      auto guard = ddp.no_backward_sync(model);
      ddp.backward(torch::mse_loss(model->forward(mine[i].data), mine[i].target) / 2.0);
    }
    ddp.backward(torch::mse_loss(model->forward(mine[i + 1].data), mine[i + 1].target) / 2.0);
    optimizer->step();
  }
  const double mean_rank = ddp.all_reduce(torch::tensor({static_cast<double>(rank)}), "mean").item<double>();
  const double product = ddp.all_reduce(torch::tensor({rank + 2.0}), "product").item<double>();
  const auto gathered = ddp.all_gather(torch::tensor({static_cast<float>(rank) + 1.0f}));
  const std::string word = ddp.broadcast(std::string(rank == 0 ? "from rank 0" : "other"), 0);
  const bool collectives_ok = mean_rank == 0.5 && product == 6.0 && gathered.size(0) == 2 && gathered[1].item<float>() == 2.0f &&
                              word == "from rank 0";
  std::cout << "rank " << rank << " of " << ddp.world_size() << ": fabric collectives "
            << (collectives_ok ? "ok" : "WRONG") << std::endl;
  if (rank != 0) return collectives_ok ? 0 : 1;

  torch::manual_seed(5);
  auto reference = std::make_shared<Regressor>();
  torch::optim::SGD single(reference->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  const auto large = join_pairs(small);
  for (std::size_t i = 0; i + 1 < large.size(); i += 2) {
    single.zero_grad();
    (torch::mse_loss(reference->forward(large[i].data), large[i].target) / 2.0).backward();
    (torch::mse_loss(reference->forward(large[i + 1].data), large[i + 1].target) / 2.0).backward();
    single.step();
  }
  double worst = 0.0;
  const auto a = model->parameters(), b = reference->parameters();
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, (a[i] - b[i]).abs().max().item<double>());
  std::cout << "variant fabric: max |difference| = " << worst << std::endl;
  return worst <= 1e-6 && collectives_ok ? 0 : 1;
}

int predict_first() {
  const auto batches = make_batches(4, 4);
  torch::manual_seed(static_cast<std::uint64_t>(::getpid()));  // other weights in each process
  auto model = std::make_shared<Predictor>();
  volt::Trainer<volt::CPU, volt::DDP> trainer(options_for("plain", 2));
  const auto outputs = trainer.predict(model, batches);
  double checksum = 0.0;
  for (const auto& output : outputs) checksum += output.sum().item<double>();
  std::cout << "rank " << trainer.global_rank() << " of " << trainer.world_size() << ": " << outputs.size()
            << " predictions, checksum " << std::setprecision(17) << checksum << std::endl;
  return outputs.size() == batches.size() ? 0 : 1;
}

int trainer_save(const std::filesystem::path& dir, const std::filesystem::path& blocker) {
  const auto batches = make_batches(8, 4);
  torch::manual_seed(5);
  auto model = std::make_shared<Regressor>();
  volt::Trainer<volt::CPU, volt::DDP> trainer(options_for("plain", 2));
  trainer.fit(model, batches);
  const int rank = trainer.global_rank();
  const auto target = dir / "model.ckpt";
  trainer.save_checkpoint(target);
  // No wait of our own: save_checkpoint returns on every rank only once rank 0's file is complete.
  const bool seen = std::filesystem::is_regular_file(target) && std::filesystem::file_size(target) > 0;
  std::cout << "rank " << rank << (seen ? " sees" : " does NOT see") << " the checkpoint" << std::endl;
  bool refused = false;
  try {
    trainer.save_checkpoint(blocker / "model.ckpt");
  } catch (const volt::CheckpointError& error) {
    refused = true;
    std::cout << "rank " << rank << " caught CheckpointError: " << error.what() << std::endl;
  }
  return seen && refused ? 0 : 1;
}

int fabric_save_fail(const std::filesystem::path& blocker) {
  volt::Fabric<volt::CPU, volt::DDP> ddp({.devices = 2});
  auto model = std::make_shared<Regressor>();
  model = ddp.setup_module(model);
  const int rank = ddp.global_rank();
  try {
    ddp.save(blocker / "model.ckpt", {{"model", model}});
  } catch (const volt::CheckpointError& error) {
    const std::string what = error.what();
    std::cout << "rank " << rank << " caught CheckpointError: " << what << std::endl;
    return rank == 0 || what.find("rank 0 could not write the checkpoint") != std::string::npos ? 0 : 1;
  }
  std::cout << "rank " << rank << " saved without an error" << std::endl;
  return 1;
}

int fail(const std::string& how, int rank, std::int64_t step, int devices = 2, int nodes = 1) {
  const auto small = make_batches(64, 4);
  torch::manual_seed(5);
  auto model = std::make_shared<Regressor>();
  auto options = options_for("plain", devices);
  options.num_nodes = nodes;
  options.max_epochs = 50;
  volt::Trainer<volt::CPU, volt::DDP> trainer(options, Saboteur{how, rank, step});
  trainer.fit(model, small);
  std::cout << "rank " << trainer.global_rank() << " finished without noticing the failure" << std::endl;
  return 0;
}

int multinode(int devices, int nodes) {
  const int world = devices * nodes;
  const auto small = make_batches(8 * world, 4);
  torch::manual_seed(5);
  auto model = std::make_shared<Regressor>();
  auto options = options_for("plain", devices);
  options.num_nodes = nodes;
  volt::Trainer<volt::CPU, volt::DDP> trainer(options);
  trainer.fit(model, small);
  std::cout << "rank " << trainer.global_rank() << " of " << trainer.world_size() << " on node "
            << trainer.node_rank() << ": global_step " << trainer.global_step() << std::endl;
  if (trainer.global_rank() != 0) return 0;

  torch::manual_seed(5);
  auto reference = std::make_shared<Regressor>();
  volt::Trainer<volt::CPU> single(options_for("plain", 1));
  single.fit(reference, join_groups(small, static_cast<std::size_t>(world)));
  double worst = 0.0;
  const auto a = model->parameters(), b = reference->parameters();
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, (a[i] - b[i]).abs().max().item<double>());
  std::cout << "multinode " << devices << "x" << nodes << ": global_step ddp " << trainer.global_step() << " single "
            << single.global_step() << "; max |difference| = " << worst << std::endl;
  return worst <= 1e-6 && trainer.global_step() == single.global_step() && trainer.world_size() == world ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.size() == 2 && args[0] == "equivalence") return equivalence<volt::CPU>(args[1]);
    if (args.size() == 3 && args[0] == "equivalence" && args[2] == "cuda") return equivalence<volt::CUDA>(args[1]);
    if (args.size() == 1 && args[0] == "fabric") return fabric();
    if (args.size() == 2 && args[0] == "datamodule") return datamodule(args[1]);
    if (args.size() == 1 && args[0] == "predict-first") return predict_first();
    if (args.size() == 1 && args[0] == "buffers") return buffers();
    if (args.size() == 2 && args[0] == "fabric-save-fail") return fabric_save_fail(args[1]);
    if (args.size() == 3 && args[0] == "trainer-save") return trainer_save(args[1], args[2]);
    if (args.size() == 4 && args[0] == "fail") return fail(args[1], std::stoi(args[2]), std::stoll(args[3]));
    if (args.size() == 6 && args[0] == "fail") {
      return fail(args[1], std::stoi(args[2]), std::stoll(args[3]), std::stoi(args[4]), std::stoi(args[5]));
    }
    if (args.size() == 3 && args[0] == "multinode") return multinode(std::stoi(args[1]), std::stoi(args[2]));
  } catch (const std::exception& error) {
    std::cerr << "ddp_worker (pid " << ::getpid() << "): error: " << error.what() << std::endl;
    return 1;
  }
  std::cerr << "usage: ddp_worker equivalence {plain|accumulate|clip} [cuda] | fabric | predict-first | "
               "datamodule DIR | fabric-save-fail PATH | trainer-save DIR BLOCKER | buffers | "
               "fail {throw|kill|exit|kill-node} RANK STEP [DEVICES NODES] | multinode DEVICES NODES\n";
  return 2;
}

// Exact resume under SIGKILL.
//
//   volt_reliability_sigkill train <dir>   trains (resuming from <dir>/ckpt/last.ckpt when it exists) and
//                                          writes the final weights and callback state to <dir>/final.bin;
//                                          prints "step N" after every optimizer step.
//   volt_reliability_sigkill drive <dir> [runs] [seed]
//                                          runs one uninterrupted training, then `runs` (10) trainings each
//                                          killed with SIGKILL once it printed a randomly chosen step (fixed
//                                          seed), resumed from the last checkpoint, and compared byte for byte
//                                          with the uninterrupted result. Exit status 0 when all match.
//
// The training is deterministic on CPU and exercises everything a resume must restore: a shuffled data order
// drawn from the global generator, dropout, Adam's moments, a step-interval LR schedule and a callback with state.
#include <torch/torch.h>

#include <volt/volt.hpp>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

constexpr int batches_per_epoch = 7;
constexpr int epochs = 4;
constexpr int total_steps = batches_per_epoch * epochs;

using Batches = std::vector<torch::data::Example<>>;

Batches make_data() {
  torch::manual_seed(1234);
  Batches batches;
  for (int i = 0; i < batches_per_epoch; ++i) {
    auto x = torch::randn({8, 8});
    batches.emplace_back(x, torch::randint(0, 3, {8}, torch::kLong));
  }
  return batches;
}

/// Iterates the batches in an order drawn from the global CPU generator at begin() (a RandomSampler).
struct Shuffled {
  const Batches* data;
  struct Iterator {
    using iterator_category = std::input_iterator_tag;
    using value_type = torch::data::Example<>;
    using difference_type = std::ptrdiff_t;
    const Batches* data = nullptr;
    std::shared_ptr<std::vector<std::int64_t>> order;
    std::size_t position = 0;
    const value_type& operator*() const { return (*data)[static_cast<std::size_t>((*order)[position])]; }
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
  std::size_t size() const { return data->size(); }
};

struct Net : torch::nn::Module {
  torch::nn::Linear fc1{torch::nn::Linear(8, 32)};
  torch::nn::Dropout dropout{torch::nn::Dropout(0.25)};
  torch::nn::Linear fc2{torch::nn::Linear(32, 3)};
  Net() {
    register_module("fc1", fc1);
    register_module("dropout", dropout);
    register_module("fc2", fc2);
  }
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t) {
    auto logits = fc2->forward(dropout->forward(torch::relu(fc1->forward(batch.data))));
    return torch::nn::functional::cross_entropy(logits, batch.target);
  }
  volt::OptimizerConfig configure_optimizers() {
    auto optimizer = std::make_shared<torch::optim::Adam>(parameters(), torch::optim::AdamOptions(1e-2));
    return {optimizer, std::make_shared<torch::optim::StepLR>(*optimizer, 5, 0.8), volt::SchedulerInterval::step};
  }
};

/// A callback whose state (a running loss sum and a count) must survive the resume; prints each step.
struct Tracker {
  double loss_sum = 0.0;
  std::int64_t batches = 0;
  void on_train_batch_end(volt::TrainerState& state, const torch::Tensor& loss, std::int64_t) {
    loss_sum += loss.item<double>();
    ++batches;
    std::printf("step %lld\n", static_cast<long long>(state.global_step));
    std::fflush(stdout);
  }
  void save_state(torch::serialize::OutputArchive& archive) const {
    archive.write("loss_sum", c10::IValue(loss_sum));
    archive.write("batches", c10::IValue(batches));
  }
  void load_state(torch::serialize::InputArchive& archive) {
    c10::IValue value;
    archive.read("loss_sum", value);
    loss_sum = value.toDouble();
    archive.read("batches", value);
    batches = value.toInt();
  }
};

int train(const std::filesystem::path& dir) {
  const auto data = make_data();
  const auto last = dir / "ckpt" / "last.ckpt";
  const bool resume = std::filesystem::exists(last);
  // Only a fresh run gets the fixed seeds: a resumed run starts from other weights and another generator
  // state, so it matches the uninterrupted run only if the checkpoint restored them.
  const std::uint64_t other = resume ? 1000 + static_cast<std::uint64_t>(::getpid()) : 0;
  torch::manual_seed(resume ? other : 3);
  auto model = std::make_shared<Net>();
  torch::manual_seed(resume ? other + 1 : 5);
  volt::TrainerOptions options;
  options.max_epochs = epochs;
  options.default_root_dir = dir.string();
  options.enable_progress_bar = false;
  options.enable_model_summary = false;
  options.logger = false;
  options.deterministic = true;
  volt::Trainer<volt::CPU> trainer(
      options, volt::ModelCheckpoint{{.dirpath = dir / "ckpt", .save_top_k = 0, .save_last = true,
                                      .every_n_train_steps = 1}},
      Tracker{});
  trainer.fit(model, Shuffled{&data}, resume ? last : std::filesystem::path{});
  std::ofstream out(dir / "final.bin", std::ios::binary | std::ios::trunc);
  for (const auto& parameter : model->parameters()) {
    auto contiguous = parameter.detach().contiguous();
    out.write(static_cast<const char*>(contiguous.data_ptr()), static_cast<std::streamsize>(contiguous.nbytes()));
  }
  const auto* tracker = trainer.callback<Tracker>();
  out.write(reinterpret_cast<const char*>(&tracker->loss_sum), sizeof(tracker->loss_sum));
  out.write(reinterpret_cast<const char*>(&tracker->batches), sizeof(tracker->batches));
  const std::int64_t step = trainer.global_step();
  out.write(reinterpret_cast<const char*>(&step), sizeof(step));
  return out ? 0 : 1;
}

std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// Runs `self train dir`; with kill_at_step > 0, sends SIGKILL once the child printed that step.
/// Returns the child's wait status.
int run_child(const std::string& self, const std::filesystem::path& dir, int kill_at_step) {
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  const pid_t child = ::fork();
  if (child < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (child == 0) {
    ::dup2(pipe_fds[1], STDOUT_FILENO);
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    ::execl(self.c_str(), self.c_str(), "train", dir.c_str(), static_cast<char*>(nullptr));
    std::_Exit(127);
  }
  ::close(pipe_fds[1]);
  std::string pending;
  char buffer[256];
  bool killed = false;
  while (true) {
    const ssize_t got = ::read(pipe_fds[0], buffer, sizeof(buffer));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    pending.append(buffer, static_cast<std::size_t>(got));
    for (auto newline = pending.find('\n'); newline != std::string::npos; newline = pending.find('\n')) {
      const std::string line = pending.substr(0, newline);
      pending.erase(0, newline + 1);
      if (!killed && kill_at_step > 0 && line == "step " + std::to_string(kill_at_step)) {
        ::kill(child, SIGKILL);
        killed = true;
      }
    }
  }
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  return status;
}

int drive(const std::string& self, const std::filesystem::path& parent, int runs, unsigned seed) {
  // A fresh folder per invocation (old ones are left for inspection; they are small).
  const auto root = parent / ("drive-" + std::to_string(::getpid()) + "-" + std::to_string(std::random_device{}()));
  std::filesystem::create_directories(root);
  std::cout << "working in " << root.string() << '\n';
  const auto reference_dir = root / "uninterrupted";
  std::filesystem::create_directories(reference_dir);
  if (const int status = run_child(self, reference_dir, 0); !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::cerr << "the uninterrupted run failed (status " << status << ")\n";
    return 1;
  }
  const auto reference = read_bytes(reference_dir / "final.bin");
  std::mt19937 random(seed);
  std::uniform_int_distribution<int> pick(1, total_steps - 1);
  int failures = 0;
  for (int run = 0; run < runs; ++run) {
    const int kill_step = pick(random);
    const auto dir = root / ("run" + std::to_string(run));
    std::filesystem::create_directories(dir);
    const int killed = run_child(self, dir, kill_step);
    const bool was_killed = WIFSIGNALED(killed) && WTERMSIG(killed) == SIGKILL;
    const int resumed = run_child(self, dir, 0);
    const bool resumed_ok = WIFEXITED(resumed) && WEXITSTATUS(resumed) == 0;
    const bool identical = resumed_ok && read_bytes(dir / "final.bin") == reference;
    std::vector<std::string> temporaries;  // a killed write's .last.ckpt.tmpN must be gone after the resume
    for (const auto& entry : std::filesystem::directory_iterator(dir / "ckpt")) {
      if (entry.path().filename().string().find(".tmp") != std::string::npos) {
        temporaries.push_back(entry.path().filename().string());
      }
    }
    std::cout << "run " << run << ": SIGKILL after step " << kill_step << (was_killed ? "" : " (ended before the kill)")
              << ", resumed: " << (resumed_ok ? "ok" : "FAILED") << ", final weights "
              << (identical ? "bit-identical" : "DIFFERENT")
              << (temporaries.empty() ? "" : ", temporary file left: " + temporaries.front()) << '\n';
    if (!was_killed || !identical || !temporaries.empty()) ++failures;
  }
  std::cout << (runs - failures) << " of " << runs << " killed runs resumed to bit-identical weights\n";
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "train" && argc == 3) return train(argv[2]);
    if (mode == "drive" && argc >= 3) {
      const int runs = argc > 3 ? std::atoi(argv[3]) : 10;
      const unsigned seed = argc > 4 ? static_cast<unsigned>(std::strtoul(argv[4], nullptr, 10)) : 20261129U;
      const std::string self = std::filesystem::canonical("/proc/self/exe").string();
      return drive(self, argv[2], runs, seed);
    }
    std::cerr << "usage: " << argv[0] << " train <dir> | drive <dir> [runs] [seed]\n";
    return 2;
  } catch (const std::exception& error) {
    std::cerr << error.what() << '\n';
    return 1;
  }
}

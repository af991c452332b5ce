// Helper program for tests/python/check_weights.py: the C++ side of the weights exchange with Python.
//
//   weights_tool write <out.pt>                  writes reference_weights() with save_weights
//   weights_tool roundtrip <in.pt> <out.pt>      load_weights then save_weights (every dtype kept)
//   weights_tool forward <python_model.pt> <out.pt> [cpu|cuda]
//                                                loads Python's Net state_dict strictly into the same C++ Net,
//                                                runs it in eval mode on the reference input on that device,
//                                                writes {"output": y}
//   weights_tool check-error <bad.pt>            prints load_weights' error for a state_dict missing keys
#include <torch/torch.h>

#include <volt/volt.hpp>

#include <iostream>
#include <string>

namespace {

/// Python: nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3), nn.ReLU(), nn.Linear(3, 2)) held as `net`.
struct Net : torch::nn::Module {
  torch::nn::Sequential net{torch::nn::Linear(4, 3), torch::nn::BatchNorm1d(3), torch::nn::ReLU(), torch::nn::Linear(3, 2)};
  Net() { register_module("net", net); }
  torch::Tensor forward(const torch::Tensor& x) { return net->forward(x); }
};

/// Deterministic values Python recomputes: arange-based, so no random generator is involved.
volt::StateDict reference_weights() {
  volt::StateDict weights;
  weights.insert("layer.weight", torch::arange(12, torch::kFloat).reshape({3, 4}) / 8.0);
  weights.insert("layer.bias", torch::arange(3, torch::kDouble) - 1.5);
  weights.insert("bn.num_batches_tracked", torch::tensor(7, torch::kLong));
  weights.insert("half", torch::arange(5, torch::kFloat).to(torch::kHalf) / 4.0);
  weights.insert("bf16", torch::arange(4, torch::kFloat).to(torch::kBFloat16) * 2.0);
  weights.insert("mask", torch::arange(6, torch::kLong).remainder(2).eq(0));
  weights.insert("transposed", torch::arange(6, torch::kFloat).reshape({2, 3}).t());
  weights.insert("big", torch::tensor({int64_t{1} << 40, -(int64_t{1} << 35)}, torch::kLong));
  weights.insert("empty", torch::empty({0, 3}));
  return weights;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "write" && argc == 3) {
      volt::save_weights(reference_weights(), argv[2]);
    } else if (mode == "roundtrip" && argc == 4) {
      volt::save_weights(volt::load_weights(argv[2]), argv[3]);
    } else if (mode == "forward" && (argc == 4 || argc == 5)) {
      const torch::Device device(argc == 5 ? argv[4] : "cpu");
      auto model = std::make_shared<Net>();
      model->to(device);
      volt::load_weights(model, argv[2]);
      model->eval();
      torch::NoGradGuard no_grad;
      auto input = (torch::arange(20, torch::kFloat).reshape({5, 4}) / 10.0 - 1.0).to(device);
      volt::StateDict out;
      out.insert("output", model->forward(input));
      volt::save_weights(out, argv[3]);
    } else if (mode == "check-error" && argc == 3) {
      auto model = std::make_shared<Net>();
      try {
        volt::load_weights(model, argv[2]);
      } catch (const std::runtime_error& error) {
        std::cout << error.what() << '\n';
        return 0;
      }
      std::cerr << "expected an error\n";
      return 1;
    } else {
      std::cerr << "usage: weights_tool write OUT | roundtrip IN OUT | forward IN OUT [device] | check-error IN\n";
      return 2;
    }
  } catch (const std::exception& error) {
    std::cerr << error.what() << '\n';
    return 1;
  }
  return 0;
}

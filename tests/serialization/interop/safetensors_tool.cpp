// Helper program for tests/python/check_safetensors.py: the C++ side of the safetensors exchange with Python.
//
//   safetensors_tool names                        prints the names of reference_tensors(), one a line
//   safetensors_tool write <out>                  writes reference_tensors() with metadata {"format": "pt"}
//   safetensors_tool roundtrip <in> <out>         load_safetensors then save_safetensors (metadata kept)
//   safetensors_tool forward <net> <out>          loads Python's Net strictly into the same C++ Net, runs it
//                                                 in eval mode on the reference input, writes {"output": y}
//   safetensors_tool check-error <bad>            prints load_safetensors' error for a file that does not fit Net
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

/// Deterministic tensors of every dtype this LibTorch and the format share; Python builds the same ones.
volt::StateDict reference_tensors() {
  const auto bytes = torch::arange(256, torch::kLong).to(torch::kByte);
  volt::StateDict t;
  t.insert("layer.weight", torch::arange(12, torch::kFloat).reshape({3, 4}) / 8.0);
  t.insert("f64", torch::arange(3, torch::kDouble) - 1.5);
  t.insert("f16", (torch::arange(5, torch::kFloat) / 4.0).to(torch::kHalf));
  t.insert("bf16", (torch::arange(4, torch::kFloat) * 2.0).to(torch::kBFloat16));
  t.insert("i64", torch::tensor({int64_t{1} << 40, -(int64_t{1} << 35)}, torch::kLong));
  t.insert("i32", torch::arange(-3, 3, torch::kInt));
  t.insert("i16", (torch::arange(-3, 3, torch::kLong) * 1000).to(torch::kShort));
  t.insert("i8", bytes.view(torch::kChar));
  t.insert("u8", bytes.clone());
  t.insert("bool", torch::arange(6, torch::kLong).remainder(2).eq(0));
  t.insert("c64", torch::view_as_complex(torch::arange(6, torch::kFloat).reshape({3, 2})));
  t.insert("scalar", torch::tensor(2.5F));
  t.insert("empty", torch::empty({0, 3}));
  t.insert("transposed", torch::arange(6, torch::kFloat).reshape({2, 3}).t());
  for (const char* name : {"Float8_e5m2", "Float8_e4m3fn", "Float8_e5m2fnuz", "Float8_e4m3fnuz", "Float8_e8m0fnu",
                           "UInt16", "UInt32", "UInt64", "Float4_e2m1fn_x2"}) {
    if (const auto type = volt::compat::scalar_type_named(name)) t.insert(name, bytes.view(*type));
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "names" && argc == 2) {
      for (const auto& item : reference_tensors()) std::cout << item.key() << '\n';
    } else if (mode == "write" && argc == 3) {
      volt::save_safetensors(reference_tensors(), argv[2], {{"format", "pt"}});
    } else if (mode == "roundtrip" && argc == 4) {
      const auto file = volt::load_safetensors(argv[2]);
      volt::save_safetensors(file.tensors, argv[3], file.metadata);
    } else if (mode == "forward" && argc == 4) {
      auto model = std::make_shared<Net>();
      volt::load_safetensors(model, argv[2]);
      model->eval();
      torch::NoGradGuard no_grad;
      const auto input = torch::arange(20, torch::kFloat).reshape({5, 4}) / 10.0 - 1.0;
      volt::StateDict out;
      out.insert("output", model->forward(input));
      volt::save_safetensors(out, argv[3]);
    } else if (mode == "check-error" && argc == 3) {
      auto model = std::make_shared<Net>();
      try {
        volt::load_safetensors(model, argv[2]);
      } catch (const volt::SafetensorsError& error) {
        std::cout << error.what() << '\n';
        return 0;
      }
      std::cerr << "expected an error\n";
      return 1;
    } else {
      std::cerr << "usage: safetensors_tool names | write OUT | roundtrip IN OUT | forward IN OUT | check-error IN\n";
      return 2;
    }
  } catch (const std::exception& error) {
    std::cerr << error.what() << '\n';
    return 1;
  }
  return 0;
}

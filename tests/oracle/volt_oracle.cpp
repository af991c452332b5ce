// volt's side of the Lightning differential tests (tests/oracle/*.py run Lightning on the same inputs).
//
//   volt_oracle devices   < cases   device specs through volt's parsers, one machine faked per case
//   volt_oracle transfer  < cases   batches through volt::batch_to_device
//   volt_oracle trainer   < cases   tiny fits on the CPU: optimizer steps, global_step, validation points
//
// Every mode reads one case per line on stdin and writes one result line per case on stdout, in order.
// Text that may hold tabs, newlines or spaces (device spec strings, error messages) travels as hex.
#include <volt/volt.hpp>

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace {

std::vector<std::string> split(const std::string& line, char separator) {
  std::vector<std::string> fields;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = line.find(separator, start);
    fields.push_back(line.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return fields;
}

std::string to_hex(std::string_view text) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size() * 2);
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    out += digits[byte >> 4];
    out += digits[byte & 0xf];
  }
  return out;
}

std::string from_hex(std::string_view hex) {
  auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    out += static_cast<char>(nibble(hex[i]) * 16 + nibble(hex[i + 1]));
  }
  return out;
}

std::vector<int> parse_int_list(const std::string& text) {
  std::vector<int> values;
  if (text.empty()) return values;
  for (const std::string& piece : split(text, ',')) values.push_back(std::stoi(piece));
  return values;
}

template <class Values>
std::string join(const Values& values, std::string_view separator = ",") {
  std::ostringstream out;
  bool first = true;
  for (const auto& value : values) {
    if (!first) out << separator;
    out << value;
    first = false;
  }
  return out.str();
}

/// "err\t<class>\t<hex message>" for the exception in flight, most derived volt/std class first.
std::string describe_current_exception() {
  try {
    throw;
  } catch (const volt::MisconfigurationError& error) {
    return "err\tMisconfigurationError\t" + to_hex(error.what());
  } catch (const std::invalid_argument& error) {
    return "err\tinvalid_argument\t" + to_hex(error.what());
  } catch (const std::logic_error& error) {
    return "err\tlogic_error\t" + to_hex(error.what());
  } catch (const std::runtime_error& error) {
    return "err\truntime_error\t" + to_hex(error.what());
  } catch (const std::exception& error) {
    return "err\texception\t" + to_hex(error.what());
  }
}

// ---------------------------------------------------------------------------------------------------------
// devices: "<accelerator>\t<cuda count>\t<mps 0|1>\t<torchelastic 0|1>\t<form>\t<value>"
//   form auto (value empty) | int (decimal, any long long) | str (hex) | list (comma-separated ints)
// result:  "ok\tNone" | "ok\t<ids>\t<parallel devices>" | "err\t<class>\t<hex message>"

template <class Accelerator>
std::string parse_with(const volt::DeviceSpec& spec) {
  const std::optional<std::vector<int>> ids = Accelerator::parse_devices(spec);
  if (!ids) return "ok\tNone";
  std::vector<std::string> devices;
  for (const torch::Device& device : Accelerator::get_parallel_devices(*ids)) devices.push_back(device.str());
  return "ok\t" + join(*ids) + "\t" + join(devices);
}

std::string run_device_case(const std::vector<std::string>& fields) {
  if (fields.size() != 6) throw std::runtime_error("devices: expected 6 tab-separated fields");
  const std::string& accelerator = fields[0];
  volt::testing::ScopedMachine machine{{.cuda_device_count = std::stoi(fields[1]),
                                        .torch_mps_available = fields[2] == "1",
                                        .processor = "arm64"}};
  if (fields[3] == "1") {
    ::setenv("TORCHELASTIC_RUN_ID", "oracle", 1);
  } else {
    ::unsetenv("TORCHELASTIC_RUN_ID");
  }
  try {
    volt::DeviceSpec spec;
    const std::string& form = fields[4];
    if (form == "int") {
      spec = volt::DeviceSpec{std::stoll(fields[5])};
    } else if (form == "str") {
      const std::string text = from_hex(fields[5]);
      spec = volt::DeviceSpec{std::string_view(text)};
    } else if (form == "list") {
      const std::vector<int> ids = parse_int_list(fields[5]);
      spec = volt::DeviceSpec::from_ids(ids);
    } else if (form != "auto") {
      throw std::runtime_error("devices: unknown spec form " + form);
    }
    if (accelerator == "cpu") return parse_with<volt::CPU>(spec);
    if (accelerator == "cuda") return parse_with<volt::CUDA>(spec);
    if (accelerator == "mps") return parse_with<volt::MPS>(spec);
    throw std::runtime_error("devices: unknown accelerator " + accelerator);
  } catch (...) {
    return describe_current_exception();
  }
}

// ---------------------------------------------------------------------------------------------------------
// transfer: "<case name>\t<target device>\t<parameters>"; result: "ok\t<canonical description>" or an error.
// The description format is shared with tests/oracle/transfer_oracle.py:
//   tensor(<device>,<dtype>,[<shape>],<same|new>,<grad 0|1>,<checksum>)   int(3)  float(1.5)  str('x')  None
//   seq[...] (a list or a tuple: C++ keeps the type statically)  dict{'k':...} (keys sorted)
//   record(<name>,...) (namedtuple / aggregate)  module(<device>,<same|new>)  custom(<to calls>,<device>)

std::string dtype_name(torch::ScalarType type) {
  switch (type) {
    case torch::kFloat: return "float32";
    case torch::kDouble: return "float64";
    case torch::kHalf: return "float16";
    case torch::kBFloat16: return "bfloat16";
    case torch::kLong: return "int64";
    case torch::kInt: return "int32";
    case torch::kShort: return "int16";
    case torch::kByte: return "uint8";
    case torch::kChar: return "int8";
    case torch::kBool: return "bool";
    default: return "other";
  }
}

torch::ScalarType dtype_from_code(int code) {
  static const torch::ScalarType types[] = {torch::kFloat, torch::kDouble, torch::kLong,  torch::kInt,
                                            torch::kBool,  torch::kByte,   torch::kHalf,  torch::kBFloat16};
  return types[code % 8];
}

/// A tensor both sides build the same way: arange(numel) reshaped, cast to the dtype.
torch::Tensor make_tensor(int dtype_code, const std::vector<std::int64_t>& shape, bool requires_grad = false) {
  std::int64_t numel = 1;
  for (auto size : shape) numel *= size;
  auto tensor = torch::arange(numel, torch::kDouble).reshape(shape).to(dtype_from_code(dtype_code));
  if (requires_grad) tensor.requires_grad_(true);
  return tensor;
}

std::string format_double(double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.17g", value);
  return buffer;
}

struct Describer {
  // `original` is the input tensor, for identity (same TensorImpl: Lightning's `moved is original`).
  std::string tensor(const torch::Tensor& moved, const torch::Tensor* original) const {
    const bool same = original != nullptr && original->unsafeGetTensorImpl() == moved.unsafeGetTensorImpl();
    std::vector<std::int64_t> shape(moved.sizes().begin(), moved.sizes().end());
    std::string checksum = "-";
    if (moved.device().is_cpu()) checksum = format_double(moved.to(torch::kDouble).sum().item<double>());
    return "tensor(" + moved.device().str() + "," + dtype_name(moved.scalar_type()) + ",[" + join(shape) + "]," +
           (same ? "same" : "new") + "," + (moved.requires_grad() ? "1" : "0") + "," + checksum + ")";
  }
};

// The custom types of the transfer cases: a value with its own `.to` (Lightning: any object with a callable
// `to`), one whose `.to` changes it in place and returns nothing (Lightning: a `.to` that returns None).
struct WithTo {
  int calls = 0;
  torch::Device device{torch::kCPU};
  WithTo to(torch::Device target) const {
    WithTo copy = *this;
    copy.calls += 1;
    copy.device = target;
    return copy;
  }
};
struct InPlaceTo {
  int calls = 0;
  torch::Device device{torch::kCPU};
  void to(torch::Device target) {
    calls += 1;
    device = target;
  }
};
// A namedtuple / dataclass: an aggregate with a tensor and a pass-through field.
struct Pair {
  torch::Tensor a;
  std::string b;
};
struct TwoTensors {
  torch::Tensor a;
  torch::Tensor b;
};

std::string describe_custom(int calls, torch::Device device) {
  return "custom(" + std::to_string(calls) + "," + device.str() + ")";
}

std::string quote(const std::string& text) { return "'" + text + "'"; }

// Walk the moved batch next to the original, describing each value.
struct Walk {
  const Describer& describer;

  std::string operator()(const torch::Tensor& moved, const torch::Tensor& original) const {
    return describer.tensor(moved, &original);
  }
  std::string operator()(std::int64_t value, std::int64_t) const { return "int(" + std::to_string(value) + ")"; }
  std::string operator()(int value, int) const { return "int(" + std::to_string(value) + ")"; }
  std::string operator()(double value, double) const { return "float(" + format_double(value) + ")"; }
  std::string operator()(bool value, bool) const { return std::string("bool(") + (value ? "True" : "False") + ")"; }
  std::string operator()(const std::string& value, const std::string&) const { return "str(" + quote(value) + ")"; }
  std::string operator()(std::nullopt_t, std::nullopt_t) const { return "None"; }
  template <class T>
  std::string operator()(const std::optional<T>& moved, const std::optional<T>& original) const {
    if (!moved) return "None";
    return (*this)(*moved, *original);
  }
  template <class T>
  std::string operator()(const std::vector<T>& moved, const std::vector<T>& original) const {
    std::vector<std::string> parts;
    for (std::size_t i = 0; i < moved.size(); ++i) parts.push_back((*this)(moved[i], original[i]));
    return "seq[" + join(parts) + "]";
  }
  template <class... T>
  std::string operator()(const std::tuple<T...>& moved, const std::tuple<T...>& original) const {
    std::vector<std::string> parts;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (parts.push_back((*this)(std::get<I>(moved), std::get<I>(original))), ...);
    }(std::index_sequence_for<T...>{});
    return "seq[" + join(parts) + "]";
  }
  template <class T>
  std::string operator()(const std::map<std::string, T>& moved, const std::map<std::string, T>& original) const {
    std::vector<std::string> parts;
    for (const auto& [key, value] : moved) parts.push_back(quote(key) + ":" + (*this)(value, original.at(key)));
    return "dict{" + join(parts) + "}";
  }
  std::string operator()(const Pair& moved, const Pair& original) const {
    return "record(Pair," + (*this)(moved.a, original.a) + "," + (*this)(moved.b, original.b) + ")";
  }
  std::string operator()(const TwoTensors& moved, const TwoTensors& original) const {
    return "record(TwoTensors," + (*this)(moved.a, original.a) + "," + (*this)(moved.b, original.b) + ")";
  }
  std::string operator()(const WithTo& moved, const WithTo&) const {
    return describe_custom(moved.calls, moved.device);
  }
  std::string operator()(const InPlaceTo& moved, const InPlaceTo&) const {
    return describe_custom(moved.calls, moved.device);
  }
  std::string operator()(const torch::nn::Linear& moved, const torch::nn::Linear& original) const {
    const bool same = moved.ptr() == original.ptr();
    return "module(" + moved->weight.device().str() + "," + (same ? "same" : "new") + ")";
  }
};

template <class Batch>
std::string move_and_describe(const Batch& batch, torch::Device device) {
  Describer describer;
  Batch moved = volt::batch_to_device(batch, device);
  return "ok\t" + Walk{describer}(moved, batch);
}

// Reads "<dtype>x<d0>x<d1>..." (e.g. "2x3x4": dtype 2, shape [3, 4]; "0" is a 0-d float tensor).
torch::Tensor tensor_from_code(const std::string& code) {
  const std::vector<std::string> parts = split(code, 'x');
  std::vector<std::int64_t> shape;
  for (std::size_t i = 1; i < parts.size(); ++i) shape.push_back(std::stoll(parts[i]));
  return make_tensor(std::stoi(parts[0]), shape);
}

std::string run_transfer_case(const std::vector<std::string>& fields) {
  if (fields.size() != 3) throw std::runtime_error("transfer: expected 3 tab-separated fields");
  const std::string& name = fields[0];
  const torch::Device device(fields[1]);
  const std::string& parameters = fields[2];
  try {
    using Tensor = torch::Tensor;
    if (name == "none") return move_and_describe(std::optional<Tensor>{}, device);
    if (name == "empty_dict") return move_and_describe(std::map<std::string, Tensor>{}, device);
    if (name == "empty_list") return move_and_describe(std::vector<Tensor>{}, device);
    if (name == "float") return move_and_describe(1.0, device);
    if (name == "int") return move_and_describe(std::int64_t{3}, device);
    if (name == "bool") return move_and_describe(true, device);
    if (name == "str") return move_and_describe(std::string("x"), device);
    if (name == "list_none_int") {
      return move_and_describe(std::tuple<std::optional<Tensor>, std::int64_t>{std::nullopt, 2}, device);
    }
    if (name == "dict_tuple_none") {
      // {"x": (1, 2), "y": None}: a dict of mixed values is a record in C++.
      return move_and_describe(std::map<std::string, std::optional<std::tuple<std::int64_t, std::int64_t>>>{
                                   {"x", std::tuple<std::int64_t, std::int64_t>{1, 2}}, {"y", std::nullopt}},
                               device);
    }
    if (name == "tensor") return move_and_describe(tensor_from_code(parameters), device);
    if (name == "tensor_grad") return move_and_describe(make_tensor(0, {2, 3}, true), device);
    if (name == "tensor_noncontiguous") return move_and_describe(make_tensor(0, {3, 4}).t(), device);
    if (name == "list_tt") {
      auto t = make_tensor(0, {2});
      return move_and_describe(std::vector<Tensor>{t, t}, device);
    }
    if (name == "nested_list") {
      auto t = make_tensor(0, {2});
      return move_and_describe(std::vector<std::vector<Tensor>>{{t, t}}, device);
    }
    if (name == "list_of_dict") {
      auto t = make_tensor(0, {2});
      return move_and_describe(std::vector<std::map<std::string, Tensor>>{{{"a", t}, {"b", t}}}, device);
    }
    if (name == "tuple_of_lists") {
      auto t = make_tensor(0, {2});
      using Dict = std::map<std::string, Tensor>;
      return move_and_describe(
          std::tuple<std::vector<Tensor>, std::vector<Dict>>{{t, t}, {{{"a", t}, {"b", t}}, {{"a", t}, {"b", t}}}},
          device);
    }
    if (name == "list_of_records") {
      auto t = make_tensor(0, {2});
      return move_and_describe(std::vector<TwoTensors>{{t, t}, {t, t}}, device);
    }
    if (name == "record_tensor_str") return move_and_describe(Pair{make_tensor(0, {2}), "s"}, device);
    if (name == "custom_to") return move_and_describe(WithTo{}, device);
    if (name == "custom_to_in_place") return move_and_describe(InPlaceTo{}, device);
    if (name == "module") return move_and_describe(torch::nn::Linear(2, 3), device);
    if (name == "random_list") {
      // parameters: tensor codes separated by ';'
      std::vector<Tensor> batch;
      if (!parameters.empty()) {
        for (const std::string& code : split(parameters, ';')) batch.push_back(tensor_from_code(code));
      }
      return move_and_describe(batch, device);
    }
    if (name == "random_dict_of_lists") {
      // parameters: "key=code;code|key=code|..." ('|' between entries, ';' between tensors of one entry)
      std::map<std::string, std::vector<Tensor>> batch;
      if (!parameters.empty()) {
        for (const std::string& entry : split(parameters, '|')) {
          const std::size_t equals = entry.find('=');
          auto& list = batch[entry.substr(0, equals)];
          const std::string codes = entry.substr(equals + 1);
          if (!codes.empty()) {
            for (const std::string& code : split(codes, ';')) list.push_back(tensor_from_code(code));
          }
        }
      }
      return move_and_describe(batch, device);
    }
    if (name == "random_tuple") {
      // parameters: "<code>;<int>;<code>": a (tensor, int, tensor) triple
      const std::vector<std::string> parts = split(parameters, ';');
      return move_and_describe(
          std::tuple<Tensor, std::int64_t, Tensor>{tensor_from_code(parts[0]), std::stoll(parts[1]),
                                                   tensor_from_code(parts[2])},
          device);
    }
    throw std::runtime_error("transfer: unknown case " + name);
  } catch (...) {
    return describe_current_exception();
  }
}

// ---------------------------------------------------------------------------------------------------------
// trainer: "<batches>\t<accumulate>\t<max_steps>\t<max_epochs|None>\t<val_check_interval>\t<every_n_epoch|None>"
//   val_check_interval: an int ("2") or a fraction ("0.5", always with a '.')
// result: "ok\t<events>\tglobal_step=<g>\tcurrent_epoch=<e>" with events "S<epoch>:<batch>" for each optimizer
// step and "V<epoch>:<batch>" for each validation run (batch = the last training batch of that epoch before
// it; -1 if none), or an error line.

struct TinyModel : torch::nn::Module {
  torch::nn::Linear linear{torch::nn::Linear(2, 1)};
  TinyModel() { register_module("linear", linear); }
  torch::Tensor training_step(const torch::data::Example<>& batch, std::int64_t) {
    return torch::mse_loss(linear->forward(batch.data), batch.target);
  }
  void validation_step(const torch::data::Example<>& batch, std::int64_t) {
    (void)torch::mse_loss(linear->forward(batch.data), batch.target);
  }
  std::shared_ptr<torch::optim::SGD> configure_optimizers() {
    return std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(0.01));
  }
};

struct EventRecorder {
  std::shared_ptr<std::vector<std::string>> events = std::make_shared<std::vector<std::string>>();
  std::shared_ptr<std::int64_t> last_batch = std::make_shared<std::int64_t>(-1);

  void on_train_epoch_start(volt::TrainerState&) { *last_batch = -1; }
  void on_train_batch_end(volt::TrainerState&, const torch::Tensor&, std::int64_t batch_idx) {
    *last_batch = batch_idx;
  }
  void on_before_optimizer_step(volt::TrainerState& state, torch::optim::Optimizer&) {
    events->push_back("S" + std::to_string(state.current_epoch) + ":" + std::to_string(state.batch_idx));
  }
  void on_validation_start(volt::TrainerState& state) {
    if (state.stage == volt::Stage::sanity_checking) return;
    events->push_back("V" + std::to_string(state.current_epoch) + ":" + std::to_string(*last_batch));
  }
};

std::string run_trainer_case(const std::vector<std::string>& fields) {
  if (fields.size() != 6) throw std::runtime_error("trainer: expected 6 tab-separated fields");
  try {
    const int batches = std::stoi(fields[0]);
    volt::TrainerOptions options;
    options.enable_progress_bar = false;
    options.enable_checkpointing = false;
    options.enable_model_summary = false;
    options.logger = false;
    options.num_sanity_val_steps = 0;
    options.accumulate_grad_batches = std::stoll(fields[1]);
    options.max_steps = std::stoll(fields[2]);
    if (fields[3] != "None") options.max_epochs = std::stoll(fields[3]);
    if (fields[4].find('.') != std::string::npos) {
      options.val_check_interval = std::stod(fields[4]);
    } else {
      options.val_check_interval = static_cast<std::int64_t>(std::stoll(fields[4]));
    }
    if (fields[5] == "None") {
      options.check_val_every_n_epoch = std::nullopt;
    } else {
      options.check_val_every_n_epoch = std::stoll(fields[5]);
    }

    std::vector<torch::data::Example<>> train;
    for (int i = 0; i < batches; ++i) {
      auto x = torch::full({1, 2}, 0.1 * (i + 1));
      train.emplace_back(x, x.sum(1, true));
    }
    std::vector<torch::data::Example<>> val(train.begin(), train.begin() + std::min(batches, 2));

    EventRecorder recorder;
    volt::Trainer<volt::CPU> trainer(options, recorder);
    auto model = std::make_shared<TinyModel>();
    trainer.fit(model, train, val);
    return "ok\t" + join(*recorder.events, " ") + "\tglobal_step=" + std::to_string(trainer.global_step()) +
           "\tcurrent_epoch=" + std::to_string(trainer.current_epoch());
  } catch (...) {
    return describe_current_exception();
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: volt_oracle devices|transfer|trainer < cases\n";
    return 2;
  }
  const std::string mode = argv[1];
  std::string (*run)(const std::vector<std::string>&) = nullptr;
  if (mode == "devices") run = run_device_case;
  if (mode == "transfer") run = run_transfer_case;
  if (mode == "trainer") run = run_trainer_case;
  if (run == nullptr) {
    std::cerr << "volt_oracle: unknown mode " << mode << "\n";
    return 2;
  }
  volt::log::set_sink([](volt::log::Level, std::string_view) {});  // results only on stdout
  std::ios::sync_with_stdio(false);
  std::string line;
  std::string out;
  while (std::getline(std::cin, line)) {
    out += run(split(line, '\t'));
    out += '\n';
  }
  std::cout << out << std::flush;
  return 0;
}

// Included first by every test source: LibTorch before doctest, because glog (pulled in by LibTorch)
// defines CHECK/CHECK_EQ and would otherwise replace doctest's macros.
#pragma once

#include <torch/torch.h>

#include <doctest/doctest.h>

#include <volt/volt.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

namespace volt_test {

/// True when a CUDA device is there; else says that `test` is skipped.
inline bool cuda_here(const char* test) {
  if (torch::cuda::is_available()) return true;
  MESSAGE("skipped (no CUDA device): " << std::string(test));
  return false;
}

/// True (and says the test is skipped) when there is no CUDA device.
inline bool cuda_missing() {
  if (torch::cuda::is_available()) return false;
  MESSAGE("skipped: no CUDA device (torch::cuda::is_available() is false)");
  return true;
}

/// Copies every parameter of `from` into the parameter of the same name in `to`.
template <class A, class B>
void copy_parameters(A& from, B& to) {
  torch::NoGradGuard no_grad;
  const auto source = from.named_parameters();
  for (auto& item : to.named_parameters()) item.value().copy_(source[item.key()]);
}

/// Every tensor's device in `batch`, found with volt's own walk (a void function observes leaves).
template <class Batch>
std::vector<torch::Device> tensor_devices(const Batch& batch) {
  std::vector<torch::Device> devices;
  volt::apply_to_collection(batch, [&](const torch::Tensor& tensor) { devices.push_back(tensor.device()); });
  return devices;
}

/// The bytes of the file at `path` (empty when it cannot be read).
inline std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// Writes `bytes` as the whole file at `path`; throws std::runtime_error naming the file when that fails.
inline void write_bytes(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw std::runtime_error("could not write the test file " + path.string());
}

/// Collects volt's log output while alive; restores the previous sink on destruction.
class CaptureLog {
 public:
  CaptureLog() {
    previous_ = volt::log::set_sink([this](volt::log::Level level, std::string_view text) {
      (level == volt::log::Level::warning ? warnings : infos).emplace_back(text);
    });
    volt::log::reset_warn_once();
  }
  ~CaptureLog() { volt::log::set_sink(std::move(previous_)); }
  CaptureLog(const CaptureLog&) = delete;
  CaptureLog& operator=(const CaptureLog&) = delete;

  bool warned(std::string_view needle) const { return contains(warnings, needle); }
  bool informed(std::string_view needle) const { return contains(infos, needle); }

  std::vector<std::string> infos;
  std::vector<std::string> warnings;

 private:
  static bool contains(const std::vector<std::string>& lines, std::string_view needle) {
    for (const auto& line : lines) {
      if (line.find(needle) != std::string::npos) return true;
    }
    return false;
  }
  volt::log::Sink previous_;
};

}  // namespace volt_test

/// Checks that `expr` throws `type` (or a subclass) whose what() contains `message`; use doctest's
/// CHECK_THROWS_WITH_AS for an exact message.
#define VOLT_CHECK_THROWS_CONTAINS(expr, type, message) CHECK_THROWS_WITH_AS(expr, doctest::Contains(message), type)

// Tests include only <volt/volt.hpp> (above): the suite is also built against the single header, where no
// other volt header exists.

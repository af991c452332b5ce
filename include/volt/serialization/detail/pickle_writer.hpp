/// \file
/// Writing the protocol-2 pickle of a state_dict as torch.save does; implementation of
/// volt/serialization/pickle.hpp, no public API.
#pragma once

#include <volt/serialization/detail/pickle_storage.hpp>

#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace volt::detail::pickle {

/// Writes protocol-2 pickle opcodes.
class Writer {
 public:
  Writer() { bytes_ += "\x80\x02"; }  // PROTO 2
  void mark() { bytes_ += '('; }
  void global(std::string_view module, std::string_view name) {
    bytes_ += 'c';
    bytes_.append(module);
    bytes_ += '\n';
    bytes_.append(name);
    bytes_ += '\n';
  }
  void string(std::string_view text) {
    bytes_ += 'X';
    append_u32(static_cast<std::uint32_t>(text.size()));
    bytes_.append(text);
  }
  void integer(std::int64_t value) {
    if (value >= INT32_MIN && value <= INT32_MAX) {
      bytes_ += 'J';  // BININT
      append_u32(static_cast<std::uint32_t>(static_cast<std::int32_t>(value)));
    } else {
      bytes_ += "\x8a\x08";  // LONG1, 8 bytes two's complement
      for (int i = 0; i < 8; ++i) bytes_ += static_cast<char>((static_cast<std::uint64_t>(value) >> (8 * i)) & 0xFFU);
    }
  }
  void int_tuple(c10::IntArrayRef values) {
    mark();
    for (const auto value : values) integer(value);
    tuple();
  }
  void tuple() { bytes_ += 't'; }
  void empty_tuple() { bytes_ += ')'; }
  void false_() { bytes_ += '\x89'; }
  void reduce() { bytes_ += 'R'; }
  void persistent_id() { bytes_ += 'Q'; }
  void setitems() { bytes_ += 'u'; }
  void stop() { bytes_ += '.'; }
  const std::string& bytes() const { return bytes_; }

 private:
  void append_u32(std::uint32_t value) {
    for (int i = 0; i < 4; ++i) bytes_ += static_cast<char>((value >> (8 * i)) & 0xFFU);
  }
  std::string bytes_;
};

/// The pickle of an OrderedDict name -> tensor as torch.save writes it; tensor i refers to storage record
/// data/<i> (its contiguous CPU bytes, which the caller writes). `tensors` must be contiguous CPU tensors.
inline std::string state_dict_pickle(const std::vector<std::pair<std::string, torch::Tensor>>& tensors) {
  Writer out;
  out.global("collections", "OrderedDict");
  out.empty_tuple();
  out.reduce();
  out.mark();
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, tensor] = tensors[i];
    out.string(name);
    out.global("torch._utils", "_rebuild_tensor_v2");
    out.mark();
    {
      out.mark();
      out.string("storage");
      out.global("torch", storage_class(tensor.scalar_type()));
      out.string(std::to_string(i));
      out.string("cpu");
      out.integer(tensor.numel());
      out.tuple();
      out.persistent_id();
    }
    out.integer(0);  // storage offset
    out.int_tuple(tensor.sizes());
    out.int_tuple(tensor.strides());
    out.false_();  // requires_grad
    out.global("collections", "OrderedDict");  // backward hooks
    out.empty_tuple();
    out.reduce();
    out.tuple();
    out.reduce();
  }
  out.setitems();
  out.stop();
  return out.bytes();
}

}  // namespace volt::detail::pickle

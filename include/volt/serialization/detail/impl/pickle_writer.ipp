/// \file
/// Definitions of the functions declared in volt/serialization/detail/pickle_writer.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail::pickle {

VOLT_INLINE std::string state_dict_pickle(const std::vector<std::pair<std::string, torch::Tensor>>& tensors) {
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

VOLT_INLINE void Writer::global(std::string_view module, std::string_view name) {
  bytes_ += 'c';
  bytes_.append(module);
  bytes_ += '\n';
  bytes_.append(name);
  bytes_ += '\n';
}

VOLT_INLINE void Writer::string(std::string_view text) {
  bytes_ += 'X';
  append_u32(static_cast<std::uint32_t>(text.size()));
  bytes_.append(text);
}

VOLT_INLINE void Writer::integer(std::int64_t value) {
  if (value >= INT32_MIN && value <= INT32_MAX) {
    bytes_ += 'J';  // BININT
    append_u32(static_cast<std::uint32_t>(static_cast<std::int32_t>(value)));
  } else {
    bytes_ += "\x8a\x08";  // LONG1, 8 bytes two's complement
    for (int i = 0; i < 8; ++i) bytes_ += static_cast<char>((static_cast<std::uint64_t>(value) >> (8 * i)) & 0xFFU);
  }
}

VOLT_INLINE void Writer::int_tuple(c10::IntArrayRef values) {
  mark();
  for (const auto value : values) integer(value);
  tuple();
}

VOLT_INLINE void Writer::append_u32(std::uint32_t value) {
  for (int i = 0; i < 4; ++i) bytes_ += static_cast<char>((value >> (8 * i)) & 0xFFU);
}

}  // namespace volt::detail::pickle

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

/// Writes values recursively (depth-limited), collecting the tensors' storages.
class ValueWriter {
 public:
  explicit ValueWriter(std::vector<torch::Tensor>& storages) : storages_(storages) {}

  void write(const Value& value, int depth) {
    if (depth > 200) throw std::invalid_argument("volt: a value nested more than 200 levels deep");
    std::visit([&](const auto& data) { write_data(data, value.parameter, depth); }, value.data);
  }
  Writer out;

 private:
  void write_data(const None&, bool, int) { out.none(); }
  void write_data(bool data, bool, int) { data ? out.true_() : out.false_(); }
  void write_data(std::int64_t data, bool, int) { out.integer(data); }
  void write_data(double data, bool, int) { out.floating(data); }
  void write_data(const std::string& data, bool, int) { out.string(data); }
  void write_data(const Tuple& data, bool, int depth) {
    if (data.items.empty()) return out.empty_tuple();
    out.mark();
    for (const auto& item : data.items) write(*item, depth + 1);
    out.tuple();
  }
  void write_data(const List& data, bool, int depth) {
    out.empty_list();
    if (data.items.empty()) return;
    out.mark();
    for (const auto& item : data.items) write(*item, depth + 1);
    out.appends();
  }
  void write_data(const Dict& data, bool, int depth) {
    if (data.ordered) {
      out.global("collections", "OrderedDict");
      out.empty_tuple();
      out.reduce();
    } else {
      out.empty_dict();
    }
    if (data.items.empty()) return;
    out.mark();
    for (const auto& [key, item] : data.items) {
      write(*key, depth + 1);
      write(*item, depth + 1);
    }
    out.setitems();
  }
  void write_data(const torch::Tensor& data, bool parameter, int) {
    if (!data.defined()) throw std::invalid_argument("volt: an undefined tensor cannot be saved");
    if (parameter) {  // _rebuild_parameter(tensor, requires_grad, backward_hooks)
      out.global("torch._utils", "_rebuild_parameter");
      out.mark();
    }
    auto tensor = data.detach().to(torch::kCPU);
    if (!tensor.is_non_overlapping_and_dense()) tensor = tensor.contiguous();
    const std::size_t index = storages_.size();
    storages_.push_back(tensor);
    out.global("torch._utils", "_rebuild_tensor_v2");
    out.mark();
    out.mark();
    out.string("storage");
    out.global("torch", storage_class(tensor.scalar_type()));
    out.string(std::to_string(index));
    out.string("cpu");
    out.integer(tensor.numel());
    out.tuple();
    out.persistent_id();
    out.integer(0);  // storage offset: the storage holds exactly the tensor's elements
    out.int_tuple(tensor.sizes());
    out.int_tuple(tensor.strides());
    out.false_();  // requires_grad
    out.global("collections", "OrderedDict");  // backward hooks
    out.empty_tuple();
    out.reduce();
    out.tuple();
    out.reduce();
    if (parameter) {
      data.requires_grad() ? out.true_() : out.false_();
      out.global("collections", "OrderedDict");
      out.empty_tuple();
      out.reduce();
      out.tuple();
      out.reduce();
    }
  }
  template <class Other>
  [[noreturn]] void write_data(const Other&, bool, int) {
    throw std::invalid_argument("volt: a value of a kind torch.save files do not hold here (a mark, global, "
                                "storage or opaque object)");
  }

  std::vector<torch::Tensor>& storages_;
};

VOLT_INLINE std::string value_pickle(const Value& root, std::vector<torch::Tensor>& storages) {
  ValueWriter writer(storages);
  writer.write(root, 0);
  writer.out.stop();
  return writer.out.bytes();
}

VOLT_INLINE void Writer::floating(double value) {
  bytes_ += 'G';  // BINFLOAT, big endian
  std::uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  for (int i = 7; i >= 0; --i) bytes_ += static_cast<char>((bits >> (8 * i)) & 0xFFU);
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

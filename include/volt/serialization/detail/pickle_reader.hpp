/// \file
/// Reading the pickle of a state_dict that torch.save wrote (the subset it uses for dicts of tensors);
/// implementation of volt/serialization/pickle.hpp, no public API.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/serialization/detail/pickle_storage.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace volt::detail::pickle {

struct Value;
using ValuePtr = std::shared_ptr<Value>;

struct Global {
  std::string module;
  std::string name;
};
struct Mark {};
struct None {};
struct Tuple {
  std::vector<ValuePtr> items;
};
struct List {
  std::vector<ValuePtr> items;
};
struct Dict {
  std::vector<std::pair<ValuePtr, ValuePtr>> items;
};
/// A storage reached through a persistent id: dtype, record key and element count.
struct Storage {
  c10::ScalarType dtype;
  std::string key;
  std::int64_t numel;
};

struct Value {
  std::variant<None, Mark, bool, std::int64_t, double, std::string, Global, Tuple, List, Dict, Storage, torch::Tensor>
      data;
};

/// Reads the pickle of a state_dict. `load_storage(key, dtype, numel)` returns the flat CPU tensor of a
/// storage record (called once per key). Throws std::runtime_error for anything outside the subset
/// torch.save writes for dicts of tensors (the message names the opcode or the Python callable).
class Reader {
 public:
  using StorageLoader = std::function<torch::Tensor(const std::string&, c10::ScalarType, std::int64_t)>;

  Reader(std::string_view bytes, StorageLoader load_storage) : bytes_(bytes), load_storage_(std::move(load_storage)) {}

  ValuePtr read();

 private:
  [[noreturn]] void fail(const std::string& what) const;

  std::string_view take(std::size_t count);
  std::string line();
  static std::uint64_t little_endian(std::string_view raw);

  void push(ValuePtr value) { stack_.push_back(std::move(value)); }
  template <class T>
  void push(T value) {
    stack_.push_back(std::make_shared<Value>(Value{std::move(value)}));
  }
  ValuePtr pop();
  const ValuePtr& top();
  std::vector<ValuePtr> pop_mark();
  ValuePtr memo_at(std::uint64_t index);
  template <class T>
  T& as(const ValuePtr& value, const char* where) {
    if (auto* result = std::get_if<T>(&value->data)) return *result;
    fail(std::string("unexpected value type in ") + where);
  }
  template <class T>
  T pop_as(const char* where) {
    auto value = pop();
    return as<T>(value, where);
  }

  ValuePtr persistent_load(const ValuePtr& id);

  torch::Tensor storage_tensor(const Storage& storage);

  static std::vector<std::int64_t> int_list(Reader& reader, const ValuePtr& value);

  ValuePtr call(const Global& callable, const std::vector<ValuePtr>& arguments);

  std::string_view bytes_;
  StorageLoader load_storage_;
  std::size_t position_ = 0;
  std::vector<ValuePtr> stack_;
  std::vector<std::size_t> marks_;
  std::map<std::uint64_t, ValuePtr> memo_;
  std::map<std::string, torch::Tensor> storages_;
};

}  // namespace volt::detail::pickle

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/serialization/detail/impl/pickle_reader.ipp>
#endif

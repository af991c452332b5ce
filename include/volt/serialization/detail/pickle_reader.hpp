/// \file
/// Reading the pickles torch.save writes (dicts, lists, tuples, numbers, strings and tensors: what
/// torch.load(weights_only=True) accepts) without running anything; implementation of
/// volt/serialization/pickle.hpp, no public API.
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
  /// The element type of a LibTorch list ("int", "float", "str", "bool", "Tensor"), where known (volt's
  /// checkpoints record it for empty lists); empty when unknown.
  std::string element{};
};
struct Dict {
  std::vector<std::pair<ValuePtr, ValuePtr>> items;
  /// Written as a collections.OrderedDict (a state_dict), else as a dict.
  bool ordered = false;
};
/// An object of a class volt does not rebuild (read in lenient mode only, e.g. the hyperparameters of a
/// Lightning checkpoint): its callable's dotted name, nothing else.
struct Opaque {
  std::string what;
};
/// A storage reached through a persistent id: dtype, record key and element count.
struct Storage {
  c10::ScalarType dtype;
  std::string key;
  std::int64_t numel;
};

struct Value {
  std::variant<None, Mark, bool, std::int64_t, double, std::string, Global, Tuple, List, Dict, Storage, torch::Tensor,
               Opaque>
      data;
  /// A tensor rebuilt as a torch.nn.Parameter (torch._utils._rebuild_parameter).
  bool parameter = false;
};

/// Makes a value.
template <class T>
ValuePtr make_value(T data, bool parameter = false) {
  return std::make_shared<Value>(Value{std::move(data), parameter});
}

/// Reads a pickle written by torch.save. `load_storage(key, dtype, numel)` returns the flat CPU tensor of a
/// storage record (called once per key). Only the callables torch.load(weights_only=True) allows for these
/// types are rebuilt (OrderedDict, _rebuild_tensor_v2, _rebuild_parameter); nothing is ever called. Any other
/// callable, and any opcode outside protocol 2's data opcodes, throws std::runtime_error naming it, unless
/// the reader is `lenient`: then objects of other classes are read as Opaque values (never rebuilt), so the
/// rest of the file can be used. Every length and index is bounds-checked; a tensor must lie inside its
/// storage and hold no more elements than it.
///
/// The values read live while the Reader does: its destructor takes every container apart, so pickles with
/// cycles (through the memo) or deep nesting are freed without recursion.
class Reader {
 public:
  using StorageLoader = std::function<torch::Tensor(const std::string&, c10::ScalarType, std::int64_t)>;

  Reader(std::string_view bytes, StorageLoader load_storage, bool lenient = false)
      : bytes_(bytes), load_storage_(std::move(load_storage)), lenient_(lenient) {}
  ~Reader();
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  ValuePtr read();

 private:
  [[noreturn]] void fail(const std::string& what) const;

  std::string_view take(std::size_t count);
  std::string line();
  static std::uint64_t little_endian(std::string_view raw);

  void push(ValuePtr value) { stack_.push_back(std::move(value)); }
  template <class T>
  void push(T value) {
    stack_.push_back(made(std::move(value)));
  }
  /// A new value, remembered for the destructor.
  template <class T>
  ValuePtr made(T value, bool parameter = false) {
    if (created_.size() >= max_values) fail("more than " + std::to_string(max_values) + " values");
    created_.push_back(make_value(std::move(value), parameter));
    return created_.back();
  }
  static constexpr std::size_t max_values = std::size_t{1} << 24;
  ValuePtr pop();
  const ValuePtr& top();
  std::vector<ValuePtr> pop_mark();
  ValuePtr memo_at(std::uint64_t index);
  template <class T>
  T& as(const ValuePtr& value, const char* where) {
    if (auto* result = std::get_if<T>(&value->data)) return *result;
    type_error(where);
  }
  /// fail() for a value of another type than `where` needs (kept out of line: g++ 13 at -O3 raises a false
  /// -Warray-bounds on the message's string copy when it is inlined into as()).
  [[noreturn, gnu::noinline, gnu::cold]] void type_error(const char* where) const {
    std::string message = "unexpected value type in ";
    message += where;
    fail(message);
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
  bool lenient_ = false;
  std::vector<ValuePtr> created_;
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

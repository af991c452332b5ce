/// \file
/// Definitions of the functions declared in volt/serialization/detail/archive_tree.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

namespace archive_tree_detail {

inline pickle::ValuePtr from_ivalue(const c10::IValue& value, const std::string& key) {
  using namespace pickle;
  if (value.isNone()) return make_value(None{});
  if (value.isBool()) return make_value(value.toBool());
  if (value.isInt()) return make_value(value.toInt());
  if (value.isDouble()) return make_value(value.toDouble());
  if (value.isString()) return make_value(value.toStringRef());
  if (value.isTensor()) return make_value(value.toTensor());
  if (value.isList()) {
    const auto list = value.toList();
    List result;
    result.element = list.elementType()->str();
    for (std::size_t i = 0; i < list.size(); ++i) result.items.push_back(from_ivalue(list.get(i), key));
    return make_value(std::move(result));
  }
  if (value.isTuple()) {
    Tuple result;
    for (const auto& item : value.toTupleRef().elements()) result.items.push_back(from_ivalue(item, key));
    return make_value(std::move(result));
  }
  throw CheckpointError("volt: the checkpoint entry '" + key + "' holds a value of type " + value.tagKind() +
                        ", which volt's checkpoint files do not store");
}

inline pickle::ValuePtr tree_of(torch::serialize::InputArchive& archive) {
  using namespace pickle;
  Dict result;
  for (const auto& key : archive.keys()) {
    torch::serialize::InputArchive nested;
    torch::Tensor tensor;
    c10::IValue value;
    ValuePtr item;
    if (archive.try_read(key, nested)) {
      item = tree_of(nested);
    } else if (archive.try_read(key, tensor, /*is_buffer=*/false)) {
      item = make_value(tensor, /*parameter=*/true);
    } else if (archive.try_read(key, tensor, /*is_buffer=*/true)) {
      item = make_value(tensor);
    } else if (archive.try_read(key, value)) {
      item = from_ivalue(value, key);
    } else {
      continue;
    }
    result.items.emplace_back(make_value(key), std::move(item));
  }
  return make_value(std::move(result));
}

[[noreturn]] inline void refuse(const std::string& shown, const std::string& key, const std::string& what) {
  throw CheckpointError("volt: " + shown + " is not a readable checkpoint: the entry '" + key + "' " + what);
}

inline std::string element_of(const pickle::Value& value) {
  using namespace pickle;
  if (std::holds_alternative<std::int64_t>(value.data)) return "int";
  if (std::holds_alternative<double>(value.data)) return "float";
  if (std::holds_alternative<bool>(value.data)) return "bool";
  if (std::holds_alternative<std::string>(value.data)) return "str";
  if (std::holds_alternative<torch::Tensor>(value.data)) return "Tensor";
  return "";
}

template <class T>
c10::List<T> typed_list(const pickle::List& list, const std::string& shown, const std::string& key) {
  c10::List<T> result;
  for (const auto& item : list.items) {
    const T* element = std::get_if<T>(&item->data);
    if (element == nullptr) refuse(shown, key, "is a list of mixed types");
    result.push_back(*element);
  }
  return result;
}

inline c10::IValue to_ivalue(const pickle::Value& value, const std::string& shown, const std::string& key,
                             int depth) {
  using namespace pickle;
  if (depth > 64) refuse(shown, key, "is nested more than 64 levels deep");
  if (std::holds_alternative<None>(value.data)) return c10::IValue();
  if (const auto* flag = std::get_if<bool>(&value.data)) return c10::IValue(*flag);
  if (const auto* number = std::get_if<std::int64_t>(&value.data)) return c10::IValue(*number);
  if (const auto* number = std::get_if<double>(&value.data)) return c10::IValue(*number);
  if (const auto* text = std::get_if<std::string>(&value.data)) return c10::IValue(*text);
  if (const auto* tensor = std::get_if<torch::Tensor>(&value.data)) return c10::IValue(*tensor);
  if (const auto* tuple = std::get_if<Tuple>(&value.data)) {
    std::vector<c10::IValue> items;
    for (const auto& item : tuple->items) items.push_back(to_ivalue(*item, shown, key, depth + 1));
    return c10::IValue(c10::ivalue::Tuple::create(std::move(items)));
  }
  if (const auto* list = std::get_if<List>(&value.data)) {
    std::string element = list->element;
    if (!list->items.empty()) element = element_of(*list->items.front());
    if (element.empty() || element == "int") return c10::IValue(typed_list<std::int64_t>(*list, shown, key));
    if (element == "float") return c10::IValue(typed_list<double>(*list, shown, key));
    if (element == "bool") return c10::IValue(typed_list<bool>(*list, shown, key));
    if (element == "str") return c10::IValue(typed_list<std::string>(*list, shown, key));
    if (element == "Tensor") return c10::IValue(typed_list<torch::Tensor>(*list, shown, key));
    refuse(shown, key, "is a list of " + element + ", which volt's checkpoints do not hold");
  }
  refuse(shown, key, "holds a value volt's checkpoints do not hold (a dict inside a list, or an object)");
}

inline bool safe_key(const std::string& key) {
  if (key.empty() || key.size() > 4096) return false;
  for (const char c : key) {
    if (c < 0x20 || c > 0x7e || c == '"' || c == '\'' || c == '\\') return false;
  }
  return true;
}

inline void fill(torch::serialize::OutputArchive& out, const pickle::Value& tree, const std::string& shown,
                 const std::string& where, int depth) {
  using namespace pickle;
  const auto* dict = std::get_if<Dict>(&tree.data);
  if (dict == nullptr) refuse(shown, where, "is not a dict");
  if (depth > 64) refuse(shown, where, "is nested more than 64 levels deep");
  std::set<std::string, std::less<>> seen;
  for (const auto& [key_value, item] : dict->items) {
    const auto* key = std::get_if<std::string>(&key_value->data);
    if (key == nullptr) refuse(shown, where, "has a key that is not a string");
    const std::string path = where.empty() ? *key : where + "." + *key;
    if (!safe_key(*key)) refuse(shown, path.substr(0, 200), "has a key volt's checkpoints do not use");
    if (!seen.insert(*key).second) refuse(shown, path, "appears twice");
    if (std::holds_alternative<Dict>(item->data)) {
      torch::serialize::OutputArchive nested;
      fill(nested, *item, shown, path, depth + 1);
      out.write(*key, nested);
    } else if (const auto* tensor = std::get_if<torch::Tensor>(&item->data)) {
      out.write(*key, *tensor, /*is_buffer=*/!item->parameter);
    } else {
      out.write(*key, to_ivalue(*item, shown, path, depth + 1));
    }
  }
}

inline void collect_empty(const pickle::Value& tree, std::vector<std::string>& path,
                          std::vector<EmptyListType>& out) {
  using namespace pickle;
  if (const auto* list = std::get_if<List>(&tree.data)) {
    if (list->items.empty() && !list->element.empty()) out.push_back({path, list->element});
    return;
  }
  const auto* dict = std::get_if<Dict>(&tree.data);
  if (dict == nullptr) return;
  for (const auto& [key, item] : dict->items) {
    const auto* name = std::get_if<std::string>(&key->data);
    if (name == nullptr) continue;
    path.push_back(*name);
    collect_empty(*item, path, out);
    path.pop_back();
  }
}

}  // namespace archive_tree_detail

VOLT_INLINE pickle::ValuePtr archive_tree(torch::serialize::OutputArchive& archive) {
  std::ostringstream bytes(std::ios::binary);
  archive.save_to(bytes);
  const std::string saved = std::move(bytes).str();
  torch::serialize::InputArchive loaded;
  loaded.load_from(saved.data(), saved.size(), torch::Device(torch::kCPU));
  return archive_tree(loaded);
}

VOLT_INLINE pickle::ValuePtr archive_tree(torch::serialize::InputArchive& archive) {
  return archive_tree_detail::tree_of(archive);
}

VOLT_INLINE void load_archive_tree(const pickle::Value& tree, torch::serialize::InputArchive& archive,
                                   torch::Device device, const std::string& shown) {
  torch::serialize::OutputArchive rebuilt;
  archive_tree_detail::fill(rebuilt, tree, shown, "", 0);
  std::ostringstream bytes(std::ios::binary);
  rebuilt.save_to(bytes);
  const std::string saved = std::move(bytes).str();
  archive.load_from(saved.data(), saved.size(), device);
}

VOLT_INLINE void write_archive_tree(const pickle::Value& tree, torch::serialize::OutputArchive& out,
                                    const std::string& shown) {
  archive_tree_detail::fill(out, tree, shown, "", 0);
}

VOLT_INLINE std::vector<EmptyListType> empty_list_types(const pickle::Value& tree) {
  std::vector<EmptyListType> result;
  std::vector<std::string> path;
  archive_tree_detail::collect_empty(tree, path, result);
  return result;
}

VOLT_INLINE void set_empty_list_types(pickle::Value& tree, const std::vector<EmptyListType>& types) {
  using namespace pickle;
  for (const auto& type : types) {
    Value* at = &tree;
    for (const auto& key : type.path) {
      auto* dict = std::get_if<Dict>(&at->data);
      if (dict == nullptr) {
        at = nullptr;
        break;
      }
      Value* next = nullptr;
      for (auto& [name, item] : dict->items) {
        if (const auto* text = std::get_if<std::string>(&name->data); text != nullptr && *text == key) next = item.get();
      }
      at = next;
      if (at == nullptr) break;
    }
    if (at == nullptr) continue;
    if (auto* list = std::get_if<List>(&at->data); list != nullptr && list->items.empty()) list->element = type.element;
  }
}

}  // namespace volt::detail

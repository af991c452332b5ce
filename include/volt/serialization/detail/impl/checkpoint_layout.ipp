/// \file
/// Definitions of the functions declared in volt/serialization/detail/checkpoint_layout.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

namespace layout_detail {

using pickle::Dict;
using pickle::List;
using pickle::Tuple;
using pickle::Value;
using pickle::ValuePtr;
using pickle::make_value;

inline ValuePtr text(const std::string& value) { return make_value(value); }

inline void put(Dict& dict, const std::string& key, ValuePtr value) { dict.items.emplace_back(text(key), std::move(value)); }

inline Dict& dict_of(Value& value) { return std::get<Dict>(value.data); }

/// The value under `key` in `dict`, or null.
inline ValuePtr find(const Dict& dict, std::string_view key) {
  for (const auto& [name, item] : dict.items) {
    if (const auto* found = std::get_if<std::string>(&name->data); found != nullptr && *found == key) return item;
  }
  return nullptr;
}

/// The child Dict `key` of `dict`, made when missing.
inline Dict& child(Dict& dict, const std::string& key) {
  for (auto& [name, item] : dict.items) {
    if (const auto* found = std::get_if<std::string>(&name->data); found != nullptr && *found == key) {
      if (auto* nested = std::get_if<Dict>(&item->data)) return *nested;
    }
  }
  put(dict, key, make_value(Dict{}));
  return dict_of(*dict.items.back().second);
}

/// Whether `tree` holds only tensors in nested Dicts, at least one (a module's archive).
inline bool module_like(const Value& tree, int depth = 0) {
  const auto* dict = std::get_if<Dict>(&tree.data);
  if (dict == nullptr || depth > 64) return false;
  bool tensor = false;
  for (const auto& [key, item] : dict->items) {
    if (std::holds_alternative<torch::Tensor>(item->data)) {
      tensor = true;
    } else if (std::holds_alternative<Dict>(item->data)) {
      const auto* nested = std::get_if<Dict>(&item->data);
      if (!nested->items.empty() && !module_like(*item, depth + 1)) return false;
      tensor = tensor || !nested->items.empty();
    } else {
      return false;
    }
  }
  return tensor;
}

/// A module's archive as a state_dict (dotted names), its buffers' names in `buffers` and its submodules
/// without state (Dropout, ReLU: an empty archive each) in `empty`.
inline void flatten(const Value& tree, const std::string& prefix, Dict& out, List& buffers, List& empty) {
  for (const auto& [key, item] : std::get<Dict>(tree.data).items) {
    const std::string name = prefix + std::get<std::string>(key->data);
    if (const auto* tensor = std::get_if<torch::Tensor>(&item->data)) {
      put(out, name, make_value(*tensor));
      if (!item->parameter) buffers.items.push_back(text(name));
    } else if (std::get<Dict>(item->data).items.empty()) {
      empty.items.push_back(text(name));
    } else {
      flatten(*item, name + ".", out, buffers, empty);
    }
  }
}

/// flatten() of a module's archive: the state_dict, and {"buffers": [...], "empty_modules": [...]}.
inline std::pair<ValuePtr, ValuePtr> flattened(const Value& tree) {
  Dict state_dict{{}, true};
  List buffers;
  List empty;
  buffers.element = "str";
  empty.element = "str";
  flatten(tree, "", state_dict, buffers, empty);
  Dict layout;
  put(layout, "buffers", make_value(std::move(buffers)));
  put(layout, "empty_modules", make_value(std::move(empty)));
  return {make_value(std::move(state_dict)), make_value(std::move(layout))};
}

[[noreturn]] inline void malformed(const std::string& shown, const std::string& what) {
  throw CheckpointError("volt: " + shown + " is not a readable checkpoint: " + what);
}

inline std::vector<std::string> strings_of(const ValuePtr& value, const std::string& shown, const std::string& what) {
  std::vector<std::string> result;
  if (value == nullptr) return result;
  const auto* list = std::get_if<List>(&value->data);
  if (list == nullptr) malformed(shown, what + " is not a list");
  for (const auto& item : list->items) {
    const auto* name = std::get_if<std::string>(&item->data);
    if (name == nullptr) malformed(shown, what + " holds something other than strings");
    result.push_back(*name);
  }
  return result;
}

/// A state_dict back as a module's archive: "a.b.w" under a -> b -> w, parameters unless named in the
/// layout's "buffers", an empty archive for each of its "empty_modules".
inline ValuePtr unflatten(const Value& flat, const ValuePtr& layout, const std::string& shown, const std::string& key) {
  const auto* dict = std::get_if<Dict>(&flat.data);
  if (dict == nullptr) malformed(shown, "'" + key + "' is not a dict");
  const auto* layout_dict = layout ? std::get_if<Dict>(&layout->data) : nullptr;
  if (layout != nullptr && layout_dict == nullptr) malformed(shown, "the layout of '" + key + "' is not a dict");
  const Dict no_layout;
  const auto& fields = layout_dict ? *layout_dict : no_layout;
  const auto buffers = strings_of(find(fields, "buffers"), shown, "the buffers of '" + key + "'");
  const std::set<std::string, std::less<>> buffer_set(buffers.begin(), buffers.end());
  auto root = make_value(Dict{});
  const auto place = [&](const std::string& name) -> std::pair<Dict*, std::string> {
    Dict* at = &dict_of(*root);
    std::size_t start = 0;
    for (std::size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', start)) {
      at = &child(*at, name.substr(start, dot - start));
      start = dot + 1;
    }
    return {at, name.substr(start)};
  };
  for (const auto& name : strings_of(find(fields, "empty_modules"), shown, "the empty modules of '" + key + "'")) {
    auto [at, last] = place(name);
    child(*at, last);
  }
  for (const auto& [name_value, item] : dict->items) {
    const auto* name = std::get_if<std::string>(&name_value->data);
    const auto* tensor = std::get_if<torch::Tensor>(&item->data);
    if (name == nullptr || tensor == nullptr) malformed(shown, "'" + key + "' holds an entry that is not name -> tensor");
    auto [at, last] = place(*name);
    put(*at, last, make_value(*tensor, /*parameter=*/buffer_set.count(*name) == 0));
  }
  return root;
}

inline bool digits(std::string_view text) {
  return !text.empty() && text.size() < 10 && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

inline std::size_t index_of(std::string_view text) { return static_cast<std::size_t>(std::stoul(std::string(text))); }

/// The optimizer index of a tree key ("optimizer", "optimizer/lrs", "optimizers/<n>", "optimizers/<n>/lrs")
/// and whether the entry holds the groups' learning rates.
inline std::optional<std::pair<std::size_t, bool>> checkpoint_optimizer_slot(std::string_view name) {
  if (name == "optimizer") return std::pair<std::size_t, bool>{0, false};
  if (name == "optimizer/lrs") return std::pair<std::size_t, bool>{0, true};
  if (name.substr(0, 11) != "optimizers/") return std::nullopt;
  auto rest = name.substr(11);
  const bool rates = rest.size() > 4 && rest.substr(rest.size() - 4) == "/lrs";
  if (rates) rest = rest.substr(0, rest.size() - 4);
  if (!digits(rest) || index_of(rest) >= 4096) return std::nullopt;
  return std::pair<std::size_t, bool>{index_of(rest), rates};
}

/// Grows `list` to hold index `index`, each new slot a Dict.
inline Dict& slot(List& list, std::size_t index) {
  while (list.items.size() <= index) list.items.push_back(make_value(Dict{}));
  return dict_of(*list.items[index]);
}

inline ValuePtr list_types_value(const std::vector<EmptyListType>& types) {
  List result;
  for (const auto& type : types) {
    List path;
    for (const auto& key : type.path) path.items.push_back(text(key));
    result.items.push_back(make_value(Tuple{{make_value(std::move(path)), text(type.element)}}));
  }
  return make_value(std::move(result));
}

inline std::vector<EmptyListType> list_types_of(const ValuePtr& value, const std::string& shown) {
  std::vector<EmptyListType> result;
  if (value == nullptr) return result;
  const auto* list = std::get_if<List>(&value->data);
  if (list == nullptr) malformed(shown, "volt.list_types is not a list");
  for (const auto& item : list->items) {
    const std::vector<ValuePtr>* pair = nullptr;
    if (const auto* tuple = std::get_if<Tuple>(&item->data)) pair = &tuple->items;
    if (const auto* as_list = std::get_if<List>(&item->data)) pair = &as_list->items;
    if (pair == nullptr || pair->size() != 2 || !std::holds_alternative<std::string>((*pair)[1]->data)) {
      malformed(shown, "volt.list_types holds an entry that is not (path, type)");
    }
    result.push_back({strings_of((*pair)[0], shown, "a path of volt.list_types"),
                      std::get<std::string>((*pair)[1]->data)});
  }
  return result;
}

}  // namespace layout_detail

VOLT_INLINE pickle::ValuePtr checkpoint_layout(const pickle::Value& tree) {
  using namespace layout_detail;
  const auto& entries = std::get<Dict>(tree.data);
  auto root = make_value(Dict{});
  Dict volt;
  put(volt, "format", make_value(checkpoint_format));
  if (find(entries, "volt/format") == nullptr) {  // Fabric: the user's keys at the top
    put(volt, "layout", text("fabric"));
    Dict flat;
    for (const auto& [key, item] : entries.items) {
      const auto& name = std::get<std::string>(key->data);
      if (module_like(*item)) {
        auto [state_dict, layout] = flattened(*item);
        put(dict_of(*root), name, state_dict);
        put(flat, name, layout);
      } else {
        put(dict_of(*root), name, item);
      }
    }
    put(volt, "flat", make_value(std::move(flat)));
    put(volt, "list_types", list_types_value(empty_list_types(tree)));
    put(dict_of(*root), "volt", make_value(std::move(volt)));
    return root;
  }
  put(volt, "layout", text("trainer"));
  Dict& top = dict_of(*root);
  if (auto epoch = find(entries, "loop/epoch")) put(top, "epoch", epoch);
  if (auto step = find(entries, "loop/global_step")) put(top, "global_step", step);
  put(top, "volt_version", text(checkpoint_volt_version));
  Dict loops;
  List optimizers;
  List schedulers;
  Dict callbacks;
  Dict others;
  bool has_optimizers = false;
  bool has_schedulers = false;
  for (const auto& [key, item] : entries.items) {
    const auto& name = std::get<std::string>(key->data);
    const std::string_view view(name);
    if (name == "volt/format" || name == "optimizers/count") continue;
    if (view.substr(0, 5) == "volt/") {
      put(volt, name.substr(5), item);
    } else if (name == "model" && module_like(*item)) {
      auto [state_dict, layout] = flattened(*item);
      put(top, "state_dict", state_dict);
      put(volt, "model_layout", layout);
    } else if (view.substr(0, 5) == "loop/") {
      put(loops, name.substr(5), item);
    } else if (const auto optimizer = checkpoint_optimizer_slot(view);
               optimizer && (optimizer->second ? std::holds_alternative<List>(item->data)
                                               : std::holds_alternative<Dict>(item->data))) {
      const auto [index, rates] = *optimizer;
      Dict& state = slot(optimizers, index);
      has_optimizers = true;
      if (!rates) {
        put(state, "state", item);
      } else if (const auto* values = std::get_if<List>(&item->data)) {
        List groups;
        for (const auto& rate : values->items) {
          Dict group;
          put(group, "lr", rate);
          groups.items.push_back(make_value(std::move(group)));
        }
        put(state, "param_groups", make_value(std::move(groups)));
      }
    } else if (name == "schedulers/steps" && std::holds_alternative<List>(item->data)) {
      has_schedulers = true;
      const auto& steps = std::get<List>(item->data).items;
      for (std::size_t i = 0; i < steps.size(); ++i) put(slot(schedulers, i), "steps", steps[i]);
    } else if (view.substr(0, 11) == "schedulers/" && digits(view.substr(11)) && index_of(view.substr(11)) < 4096 &&
               std::holds_alternative<Dict>(item->data)) {
      put(slot(schedulers, index_of(view.substr(11))), "state", item);
    } else if (view.substr(0, 10) == "callbacks/" && std::holds_alternative<Dict>(item->data)) {
      put(callbacks, name.substr(10), item);
    } else if (name == "hparams" && std::holds_alternative<Dict>(item->data)) {
      put(top, "hyper_parameters", item);
    } else {
      put(others, name, item);
    }
  }
  if (!loops.items.empty()) put(top, "loops", make_value(std::move(loops)));
  if (has_optimizers) put(top, "optimizer_states", make_value(std::move(optimizers)));
  if (has_schedulers) put(top, "lr_schedulers", make_value(std::move(schedulers)));
  if (!callbacks.items.empty() || has_optimizers) put(top, "callbacks", make_value(std::move(callbacks)));
  put(volt, "list_types", list_types_value(empty_list_types(tree)));
  put(volt, "entries", make_value(std::move(others)));
  put(top, "volt", make_value(std::move(volt)));
  return root;
}

VOLT_INLINE bool is_volt_checkpoint(const pickle::Value& root) {
  using namespace layout_detail;
  const auto* dict = std::get_if<Dict>(&root.data);
  if (dict == nullptr) return false;
  const auto volt = find(*dict, "volt");
  const auto* section = volt ? std::get_if<Dict>(&volt->data) : nullptr;
  const auto format = section ? find(*section, "format") : nullptr;
  return format != nullptr && std::holds_alternative<std::int64_t>(format->data);
}

VOLT_INLINE pickle::ValuePtr archive_of_layout(const pickle::Value& root, const std::string& shown) {
  using namespace layout_detail;
  const auto& top = std::get<Dict>(root.data);
  const auto& volt = std::get<Dict>(find(top, "volt")->data);
  const auto format = std::get<std::int64_t>(find(volt, "format")->data);
  if (format > checkpoint_format) {
    malformed(shown, "it was written in volt's checkpoint format " + std::to_string(format) + " by a newer volt; "
                     "this one reads formats up to " + std::to_string(checkpoint_format));
  }
  const auto layout_value = find(volt, "layout");
  const auto* layout = layout_value ? std::get_if<std::string>(&layout_value->data) : nullptr;
  if (layout == nullptr || (*layout != "trainer" && *layout != "fabric")) malformed(shown, "volt.layout is missing or unknown");
  auto tree = make_value(Dict{});
  Dict& out = dict_of(*tree);
  const auto dict_at = [&](const ValuePtr& value, const std::string& what) -> const Dict& {
    const auto* dict = value ? std::get_if<Dict>(&value->data) : nullptr;
    if (dict == nullptr) malformed(shown, what + " is not a dict");
    return *dict;
  };
  const auto list_at = [&](const ValuePtr& value, const std::string& what) -> const List& {
    const auto* list = value ? std::get_if<List>(&value->data) : nullptr;
    if (list == nullptr) malformed(shown, what + " is not a list");
    return *list;
  };
  const auto key_of = [&](const ValuePtr& key, const std::string& what) -> const std::string& {
    const auto* name = std::get_if<std::string>(&key->data);
    if (name == nullptr) malformed(shown, what + " has a key that is not a string");
    return *name;
  };
  if (*layout == "fabric") {
    const Dict no_flat;
    const auto& flat = find(volt, "flat") ? dict_at(find(volt, "flat"), "volt.flat") : no_flat;
    for (const auto& [key, item] : top.items) {
      const auto& name = key_of(key, "the checkpoint");
      if (name == "volt") continue;
      if (const auto layout = find(flat, name)) {
        put(out, name, unflatten(*item, layout, shown, name));
      } else {
        put(out, name, item);
      }
    }
  } else {
    put(out, "volt/format", make_value(format));
    for (const auto& [key, item] : volt.items) {
      const auto& name = key_of(key, "volt");
      if (name == "format" || name == "layout" || name == "model_layout" || name == "list_types" || name == "entries") {
        continue;
      }
      put(out, "volt/" + name, item);
    }
    if (const auto state_dict = find(top, "state_dict")) {
      put(out, "model", unflatten(*state_dict, find(volt, "model_layout"), shown, "state_dict"));
    }
    if (const auto loops = find(top, "loops")) {
      for (const auto& [key, item] : dict_at(loops, "loops").items) put(out, "loop/" + key_of(key, "loops"), item);
    }
    if (const auto optimizers = find(top, "optimizer_states")) {
      const auto& list = list_at(optimizers, "optimizer_states");
      put(out, "optimizers/count", make_value(static_cast<std::int64_t>(list.items.size())));
      for (std::size_t i = 0; i < list.items.size(); ++i) {
        const std::string key = i == 0 ? std::string("optimizer") : "optimizers/" + std::to_string(i);
        const auto& entry = dict_at(list.items[i], "optimizer_states[" + std::to_string(i) + "]");
        if (auto state = find(entry, "state")) put(out, key, state);
        if (const auto groups = find(entry, "param_groups")) {
          List rates;
          rates.element = "float";
          for (const auto& group : list_at(groups, key + ".param_groups").items) {
            auto rate = find(dict_at(group, key + ".param_groups[]"), "lr");
            if (rate == nullptr || !std::holds_alternative<double>(rate->data)) {
              malformed(shown, "a param_group of optimizer_states[" + std::to_string(i) + "] has no float lr");
            }
            rates.items.push_back(rate);
          }
          put(out, key + "/lrs", make_value(std::move(rates)));
        }
      }
    }
    if (const auto schedulers = find(top, "lr_schedulers")) {
      const auto& list = list_at(schedulers, "lr_schedulers");
      List steps;
      steps.element = "int";
      for (std::size_t i = 0; i < list.items.size(); ++i) {
        const auto& entry = dict_at(list.items[i], "lr_schedulers[" + std::to_string(i) + "]");
        if (auto step = find(entry, "steps")) steps.items.push_back(step);
        if (auto state = find(entry, "state")) put(out, "schedulers/" + std::to_string(i), state);
      }
      put(out, "schedulers/steps", make_value(std::move(steps)));
    }
    if (auto hparams = find(top, "hyper_parameters")) put(out, "hparams", hparams);
    if (const auto callbacks = find(top, "callbacks")) {
      for (const auto& [key, item] : dict_at(callbacks, "callbacks").items) {
        put(out, "callbacks/" + key_of(key, "callbacks"), item);
      }
    }
    if (const auto entries = find(volt, "entries")) {
      for (const auto& [key, item] : dict_at(entries, "volt.entries").items) put(out, key_of(key, "volt.entries"), item);
    }
  }
  set_empty_list_types(*tree, list_types_of(find(volt, "list_types"), shown));
  return tree;
}

}  // namespace volt::detail

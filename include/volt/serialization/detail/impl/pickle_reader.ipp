/// \file
/// Definitions of the functions declared in volt/serialization/detail/pickle_reader.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail::pickle {

VOLT_INLINE auto Reader::read() -> ValuePtr {
  while (true) {
    const auto opcode = static_cast<unsigned char>(take(1)[0]);
    switch (opcode) {
      case 0x80: take(1); break;             // PROTO
      case 0x95: take(8); break;             // FRAME
      case '(': marks_.push_back(stack_.size()); break;
      case '.': {                            // STOP
        if (stack_.empty()) fail("STOP with an empty stack");
        return stack_.back();
      }
      case 'N': push(None{}); break;
      case 0x88: push(true); break;
      case 0x89: push(false); break;
      case 'J': push(static_cast<std::int64_t>(static_cast<std::int32_t>(little_endian(take(4))))); break;
      case 'K': push(static_cast<std::int64_t>(little_endian(take(1)))); break;
      case 'M': push(static_cast<std::int64_t>(little_endian(take(2)))); break;
      case 0x8a: {                           // LONG1
        const auto size = little_endian(take(1));
        if (size > 8) fail("integer wider than 64 bits");
        std::uint64_t raw = size == 0 ? 0 : little_endian(take(size));
        if (size > 0 && size < 8 && (raw >> (8 * size - 1)) != 0) raw |= ~std::uint64_t{0} << (8 * size);
        push(static_cast<std::int64_t>(raw));
        break;
      }
      case 'G': {                            // BINFLOAT, big endian
        const auto raw = take(8);
        std::uint64_t bits = 0;
        for (char c : raw) bits = (bits << 8) | static_cast<unsigned char>(c);
        double value = 0;
        std::memcpy(&value, &bits, sizeof value);
        push(value);
        break;
      }
      case 'X': push(std::string(take(little_endian(take(4))))); break;
      case 0x8c: push(std::string(take(little_endian(take(1))))); break;
      case 0x8d: push(std::string(take(little_endian(take(8))))); break;
      case 'c': {
        Global global;
        global.module = line();
        global.name = line();
        push(std::move(global));
        break;
      }
      case 0x93: {                           // STACK_GLOBAL
        auto name = pop_as<std::string>("STACK_GLOBAL");
        auto module = pop_as<std::string>("STACK_GLOBAL");
        push(Global{std::move(module), std::move(name)});
        break;
      }
      case 'q': memo_[little_endian(take(1))] = top(); break;
      case 'r': memo_[little_endian(take(4))] = top(); break;
      case 0x94: memo_[memo_.size()] = top(); break;
      case 'h': {
        auto value = memo_at(little_endian(take(1)));
        stack_.push_back(std::move(value));
        break;
      }
      case 'j': {
        auto value = memo_at(little_endian(take(4)));
        stack_.push_back(std::move(value));
        break;
      }
      case ')': push(Tuple{}); break;
      case ']': push(List{}); break;
      case '}': push(Dict{}); break;
      case 't': push(Tuple{pop_mark()}); break;
      case 'l': push(List{pop_mark()}); break;
      case 0x85: case 0x86: case 0x87: {     // TUPLE1..3
        const std::size_t count = opcode - 0x84U;
        if (stack_.size() < count) fail("TUPLE with too few items");
        Tuple tuple{std::vector<ValuePtr>(stack_.end() - static_cast<std::ptrdiff_t>(count), stack_.end())};
        stack_.resize(stack_.size() - count);
        push(std::move(tuple));
        break;
      }
      case 'a': {
        auto item = pop();
        as<List>(top(), "APPEND").items.push_back(std::move(item));
        break;
      }
      case 'e': {
        auto items = pop_mark();
        auto& list = as<List>(top(), "APPENDS").items;
        list.insert(list.end(), items.begin(), items.end());
        break;
      }
      case 's': {
        auto value = pop();
        auto key = pop();
        as<Dict>(top(), "SETITEM").items.emplace_back(std::move(key), std::move(value));
        break;
      }
      case 'u': case 'd': {
        auto items = pop_mark();
        if (items.size() % 2 != 0) fail("SETITEMS with an odd number of items");
        if (opcode == 'd') push(Dict{});
        auto& dict = as<Dict>(top(), "SETITEMS").items;
        for (std::size_t i = 0; i < items.size(); i += 2) dict.emplace_back(items[i], items[i + 1]);
        break;
      }
      case 'b': {                            // BUILD: state of an OrderedDict (`_metadata`) is not needed
        pop();
        const bool opaque = std::holds_alternative<Opaque>(top()->data);
        if (!std::holds_alternative<Dict>(top()->data) && !opaque) fail("BUILD on an object other than a dict");
        break;
      }
      case 0x81: {                           // NEWOBJ: an instance of a class (lenient reads only)
        pop();
        const auto type = pop();
        const auto* global = std::get_if<Global>(&type->data);
        const std::string name = global ? global->module + "." + global->name : std::string("a non-class");
        if (!lenient_) fail("unsupported class " + name + " (volt reads dicts, lists, numbers, strings and tensors)");
        push(Opaque{name});
        break;
      }
      case '0': pop(); break;                // POP
      case '1': pop_mark(); break;           // POP_MARK
      case '2': stack_.push_back(top()); break;  // DUP
      case 'Q': push(persistent_load(pop())); break;
      case 'R': {
        auto arguments = pop();
        auto callable = pop();
        push(call(as<Global>(callable, "REDUCE"), as<Tuple>(arguments, "REDUCE").items));
        break;
      }
      default: {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", opcode);
        fail(std::string("unsupported pickle opcode ") + hex);
      }
    }
  }
}

VOLT_INLINE Reader::~Reader() {
  // Take every container apart first: the values then hold no others, and free one by one.
  for (const auto& value : created_) {
    if (auto* tuple = std::get_if<Tuple>(&value->data)) tuple->items.clear();
    if (auto* list = std::get_if<List>(&value->data)) list->items.clear();
    if (auto* dict = std::get_if<Dict>(&value->data)) dict->items.clear();
  }
}

VOLT_INLINE void Reader::fail(const std::string& what) const {
  throw std::runtime_error("the pickle (data.pkl) cannot be read: " + what + " at byte " + std::to_string(position_));
}

VOLT_INLINE auto Reader::take(std::size_t count) -> std::string_view {
  if (position_ + count > bytes_.size()) fail("truncated data");
  const auto result = bytes_.substr(position_, count);
  position_ += count;
  return result;
}

VOLT_INLINE std::string Reader::line() {
  const auto end = bytes_.find('\n', position_);
  if (end == std::string_view::npos) fail("unterminated GLOBAL");
  std::string result(bytes_.substr(position_, end - position_));
  position_ = end + 1;
  return result;
}

VOLT_INLINE std::uint64_t Reader::little_endian(std::string_view raw) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < raw.size(); ++i) value |= static_cast<std::uint64_t>(static_cast<unsigned char>(raw[i])) << (8 * i);
  return value;
}

VOLT_INLINE auto Reader::pop() -> ValuePtr {
  if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back())) fail("stack underflow");
  auto value = std::move(stack_.back());
  stack_.pop_back();
  return value;
}

VOLT_INLINE auto Reader::top() -> const ValuePtr& {
  if (stack_.empty()) fail("stack underflow");
  return stack_.back();
}

VOLT_INLINE auto Reader::pop_mark() -> std::vector<ValuePtr> {
  if (marks_.empty()) fail("no MARK");
  const std::size_t start = marks_.back();
  marks_.pop_back();
  std::vector<ValuePtr> items(stack_.begin() + static_cast<std::ptrdiff_t>(start), stack_.end());
  stack_.resize(start);
  return items;
}

VOLT_INLINE auto Reader::memo_at(std::uint64_t index) -> ValuePtr {
  const auto found = memo_.find(index);
  if (found == memo_.end()) fail("unknown memo entry " + std::to_string(index));
  return found->second;
}

VOLT_INLINE auto Reader::persistent_load(const ValuePtr& id) -> ValuePtr {
  const auto& items = as<Tuple>(id, "a persistent id").items;
  if (items.size() != 5 || as<std::string>(items[0], "a persistent id") != "storage") {
    fail("a persistent id other than ('storage', type, key, location, numel)");
  }
  const auto& type = as<Global>(items[1], "a persistent id");
  const auto dtype = storage_dtype(type.name);
  if (type.module != "torch" || !dtype) fail("unsupported storage type " + type.module + "." + type.name);
  Storage storage{*dtype, as<std::string>(items[2], "a persistent id"), as<std::int64_t>(items[4], "a persistent id")};
  if (storage.numel < 0) fail("a storage of " + std::to_string(storage.numel) + " elements");
  return made(std::move(storage));
}

VOLT_INLINE torch::Tensor Reader::storage_tensor(const Storage& storage) {
  auto found = storages_.find(storage.key);
  if (found == storages_.end()) {
    found = storages_.emplace(storage.key, load_storage_(storage.key, storage.dtype, storage.numel)).first;
  }
  return found->second;
}

VOLT_INLINE auto Reader::int_list(Reader& reader, const ValuePtr& value) -> std::vector<std::int64_t> {
  std::vector<std::int64_t> result;
  for (const auto& item : reader.as<Tuple>(value, "a tensor's size or stride").items) {
    result.push_back(reader.as<std::int64_t>(item, "a tensor's size or stride"));
  }
  return result;
}

VOLT_INLINE auto Reader::call(const Global& callable, const std::vector<ValuePtr>& arguments) -> ValuePtr {
  const std::string name = callable.module + "." + callable.name;
  if (name == "collections.OrderedDict" && arguments.empty()) return made(Dict{{}, true});
  if (name == "torch._utils._rebuild_tensor_v2" || name == "torch._utils._rebuild_tensor") {
    if (arguments.size() < 4) fail(name + " with fewer than 4 arguments");
    const auto& storage = as<Storage>(arguments[0], name.c_str());
    const auto offset = as<std::int64_t>(arguments[1], name.c_str());
    const auto sizes = int_list(*this, arguments[2]);
    const auto strides = int_list(*this, arguments[3]);
    if (sizes.size() != strides.size()) fail(name + ": size and stride of different lengths");
    if (sizes.size() > 64) fail(name + ": more than 64 dimensions");
    // Every product and sum is checked: the tensor must lie inside its storage and hold no more elements.
    std::int64_t elements = 1;
    std::int64_t last = offset;
    bool empty = false;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      if (sizes[i] < 0 || strides[i] < 0) fail(name + ": a negative size or stride");
      if (sizes[i] == 0) empty = true;
      std::int64_t reach = 0;
      if (__builtin_mul_overflow(elements, sizes[i], &elements) ||
          (sizes[i] > 0 && (__builtin_mul_overflow(sizes[i] - 1, strides[i], &reach) ||
                            __builtin_add_overflow(last, reach, &last)))) {
        fail(name + ": a size or stride out of range");
      }
    }
    if (offset < 0 || offset > storage.numel) fail(name + ": a storage offset out of range");
    if (!empty && (last >= storage.numel || elements > storage.numel)) {
      fail(name + ": the tensor reaches past its storage of " + std::to_string(storage.numel) + " elements");
    }
    auto flat = storage_tensor(storage);
    if (flat.numel() != storage.numel) fail(name + ": a storage of another size than its record");
    return made(flat.as_strided(sizes, strides, offset));
  }
  if (name == "torch._utils._rebuild_parameter" || name == "torch._utils._rebuild_parameter_with_state") {
    if (arguments.empty()) fail(name + " without arguments");
    return made(as<torch::Tensor>(arguments[0], name.c_str()), /*parameter=*/true);
  }
  if (lenient_) return made(Opaque{name});
  fail("unsupported callable " + name + " (volt reads dicts, lists, numbers, strings and tensors)");
}

}  // namespace volt::detail::pickle

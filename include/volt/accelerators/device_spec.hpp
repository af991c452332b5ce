/// \file
/// volt::DeviceSpec: the value of Lightning's `devices=` argument, parsed in constant evaluation.
///
/// Lightning accepts `devices` as an int (a count, -1 = all, 0 = none), a string ("2", "-1", "0,", "1, 3")
/// or a list of ids, and its parsers treat the three forms differently ("3" is a count for every
/// accelerator, a list is refused by the CPU parser, "0" and [] short-circuit to "no devices"). A DeviceSpec
/// remembers its form and holds the result of Lightning's string normalisation
/// (`_normalize_parse_gpu_string_input`, spec 1.1 step 3), computed when the DeviceSpec is made:
///
///   * a malformed string throws std::invalid_argument at run time, with Python's message first
///     ("invalid literal for int() with base 10: '1.5'") and then the grammar volt accepts;
///   * in constant evaluation the same string is a compile error (the error path calls a non-constexpr
///     function whose name says what is wrong, e.g. `invalid_literal_for_int_with_base_10`).
///
/// Python's text rules it follows (str.strip, int, repr) are in volt/accelerators/detail/python_text.hpp.
/// Everything that depends on the machine (which ids exist, "-1" = all) is decided later by the
/// accelerator's parse_devices(). This header includes nothing of LibTorch, so tools such as the fuzzer
/// in fuzz/ build without it.
///
/// A DeviceSpec is a structural type: it can be a template argument, e.g.
/// `volt::static_devices<volt::MPS, "0,">` (volt/accelerators/static_devices.hpp). Capacity: at most
/// `volt::max_device_ids` (64) explicit ids and `volt::max_device_spec_text` (128) characters of the
/// original string kept for messages (longer strings are parsed in full; only the copy kept is cut).
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/accelerators/detail/python_text.hpp>

#include <climits>
#include <concepts>
#include <cstddef>
#include <initializer_list>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace volt {

/// Most explicit device ids one DeviceSpec holds ("0,1,...", volt::devices({...})).
inline constexpr int max_device_ids = 64;
/// Characters of a string spec kept for error messages.
inline constexpr int max_device_spec_text = 128;

/// A fixed-capacity list of device ids, usable in constant expressions:
/// `static_assert(volt::devices("1, 3").ids().equals({1, 3}))`.
struct DeviceIds {
  /// \cond
  // Public because structural types (template arguments) need public members; use the accessors.
  int values_[max_device_ids] = {};
  int size_ = 0;
  /// \endcond

  /// The first id (the ids in the order given, duplicates kept).
  constexpr const int* begin() const { return values_; }
  /// One past the last id.
  constexpr const int* end() const { return values_ + size_; }
  /// The number of ids, at most volt::max_device_ids.
  constexpr int size() const { return size_; }
  /// Whether the list holds no id.
  constexpr bool empty() const { return size_ == 0; }
  /// Precondition: index < size().
  constexpr int operator[](int index) const { return values_[index]; }
  /// Whether the ids are exactly `expected`, in the same order (for tests and static_assert).
  constexpr bool equals(std::initializer_list<int> expected) const {
    if (static_cast<int>(expected.size()) != size_) return false;
    int index = 0;
    for (int id : expected) {
      if (values_[index++] != id) return false;
    }
    return true;
  }
  /// Whether an id occurs twice (Lightning: "Device ID's (GPU) must be unique.").
  constexpr bool has_duplicates() const {
    for (int i = 0; i < size_; ++i) {
      for (int j = i + 1; j < size_; ++j) {
        if (values_[i] == values_[j]) return true;
      }
    }
    return false;
  }
  /// Member-wise equality of the stored ids and sizes.
  friend constexpr bool operator==(const DeviceIds&, const DeviceIds&) = default;
};

namespace detail {

/// The integer types a device count may have: not bool, not a character type.
template <class T>
concept device_count_integer =
    std::integral<T> && !std::same_as<T, bool> && !std::same_as<T, char> && !std::same_as<T, signed char> &&
    !std::same_as<T, unsigned char> && !std::same_as<T, wchar_t> && !std::same_as<T, char8_t> &&
    !std::same_as<T, char16_t> && !std::same_as<T, char32_t>;

/// The text volt appends to a parse error: what a device spec string may be.
inline constexpr std::string_view device_spec_grammar =
    "volt: a device spec string is a device count (\"2\"; \"-1\" for all devices; \"0\" for none) or a "
    "comma-separated list of device ids (\"0,2\", \"1, 3\", \"1,\"), each an integer as Python's int() reads it";

// The error paths of DeviceSpec's constructors. They are not constexpr on purpose: reaching one during
// constant evaluation makes the DeviceSpec a compile error whose message names the function.
[[noreturn]] VOLT_INLINE void invalid_literal_for_int_with_base_10(std::string_view stripped_piece);
[[noreturn]] VOLT_INLINE void device_number_outside_int_range(std::string_view stripped_piece);
[[noreturn]] VOLT_INLINE void device_count_outside_int_range(long long count);
[[noreturn]] VOLT_INLINE void too_many_device_ids(std::size_t count);
// Python's TypeError for `devices=None` (no final period in Lightning's text).
[[noreturn]] VOLT_INLINE std::string_view null_device_spec_text();
// Reached only in constant evaluation, where a repeated id is refused for every accelerator (the GPU parsers:
// "Device ID's (GPU) must be unique."; the CPU parser refuses every list); at run time the accelerator's
// parse_devices() reports it with Lightning's message.
[[noreturn]] VOLT_INLINE void device_ids_must_be_unique();
[[noreturn]] VOLT_INLINE void device_ids_of_a_non_list_spec();

}  // namespace detail

/// What a `devices` value asks for, once the form's own rules are applied (Lightning's
/// `_parse_gpu_ids` steps 2-3); the machine decides the rest.
enum class DeviceRequest : unsigned char {
  automatic,  ///< "auto": the accelerator's auto_device_count()
  none,       ///< 0, "0", " 0 ", "[]", volt::devices({}): Lightning's "no GPUs" short-circuit
  all,        ///< -1, "-1", " -1": every available device
  count,      ///< any other int n: ids 0..n-1 (n < 0 or the string "00" give no ids: "GPUs requested but none are available.")
  ids,        ///< an explicit list: "1, 3", "0,", volt::devices({1, 3}) (a string of commas alone gives an empty list)
};

/// The form a DeviceSpec was written in; Lightning's parsers treat the forms differently.
enum class DeviceSpecForm : unsigned char { automatic, integer, string, id_list };

/// The `devices` option: a literal type, constexpr and implicitly constructible from an int count, a
/// string, or (through volt::devices({...})) a list of ids. DeviceSpec{} is "auto".
/// Throws std::invalid_argument for a malformed string, a number outside int, or more than
/// volt::max_device_ids ids; in constant evaluation these are compile errors, and so is a repeated id
/// (`constexpr volt::DeviceSpec spec{"0,0"};`), which every accelerator refuses (at run time the
/// accelerator's parse_devices() refuses it with Lightning's message).
/// bool, floating-point, character and nullptr arguments do not compile.
struct DeviceSpec {
  /// \cond
  // Public only because a structural type (usable as a template argument) needs public members.
  // Read them through the accessors below.
  DeviceSpecForm form_ = DeviceSpecForm::automatic;
  DeviceRequest request_ = DeviceRequest::automatic;
  int count_ = 0;                      // the count for DeviceRequest::count (and 0 for "0")
  DeviceIds ids_{};                    // the ids for DeviceRequest::ids
  bool text_is_digits_ = false;        // str.strip(text).isdigit(): the CPU parser's test
  bool cpu_int_rejects_text_ = false;  // int(text) fails although the stripped text is digits ("\x1c3")
  char text_[max_device_spec_text] = {};
  int text_size_ = 0;
  bool text_truncated_ = false;
  /// \endcond

  /// "auto": resolved to the accelerator's auto_device_count() when the Trainer selects devices.
  constexpr DeviceSpec() = default;

  /// A device count: 0 = none, -1 = all, n > 0 = the first n devices. Throws std::invalid_argument if
  /// the value does not fit in an int.
  template <detail::device_count_integer Integer>
  constexpr DeviceSpec(Integer count) : form_(DeviceSpecForm::integer) {  // NOLINT(google-explicit-constructor)
    if (std::cmp_greater(count, INT_MAX) || std::cmp_less(count, INT_MIN)) {
      detail::device_count_outside_int_range(static_cast<long long>(count));
    }
    count_ = static_cast<int>(count);
    request_ = count_ == 0 ? DeviceRequest::none : count_ == -1 ? DeviceRequest::all : DeviceRequest::count;
  }

  /// A string spec, parsed as Lightning parses it ("auto" exactly means DeviceSpec{}).
  /// Throws std::invalid_argument for text that Python's int() would refuse.
  /// A null pointer throws std::invalid_argument with Lightning's message for `devices=None`.
  constexpr DeviceSpec(const char* text)  // NOLINT(google-explicit-constructor)
      : DeviceSpec(text != nullptr ? std::string_view(text) : detail::null_device_spec_text()) {}
  /// A string spec, parsed as Lightning parses it ("auto" exactly means DeviceSpec{}). Throws
  /// std::invalid_argument for text that Python's int() would refuse; in constant evaluation that is a compile
  /// error. Only the first volt::max_device_spec_text characters are kept for messages.
  constexpr DeviceSpec(std::string_view text) {  // NOLINT(google-explicit-constructor)
    if (text == "auto") return;
    form_ = DeviceSpecForm::string;
    keep_text(text);
    parse_string(text);
  }

  DeviceSpec(std::nullptr_t) = delete;
  /// bool and floating-point values are not device specs (Lightning raises TypeError for them).
  template <class T>
    requires(std::is_arithmetic_v<T> && !detail::device_count_integer<T>)
  DeviceSpec(T) = delete;

  /// A list of ids (what volt::devices({...}) makes). An empty list is "no devices".
  /// Throws std::invalid_argument for more than volt::max_device_ids ids.
  static constexpr DeviceSpec from_ids(std::span<const int> ids) {
    DeviceSpec spec;
    spec.form_ = DeviceSpecForm::id_list;
    if (ids.size() > static_cast<std::size_t>(max_device_ids)) detail::too_many_device_ids(ids.size());
    spec.request_ = ids.empty() ? DeviceRequest::none : DeviceRequest::ids;
    for (int id : ids) spec.ids_.values_[spec.ids_.size_++] = id;
    if (std::is_constant_evaluated() && spec.ids_.has_duplicates()) detail::device_ids_must_be_unique();
    return spec;
  }

  /// The form the spec was written in (int, string, id list, or "auto").
  constexpr DeviceSpecForm form() const { return form_; }
  /// What the spec asks for after the form's own rules (see DeviceRequest).
  constexpr DeviceRequest request() const { return request_; }
  /// Whether the spec is "auto" (DeviceSpec{} or the string "auto").
  constexpr bool is_auto() const { return request_ == DeviceRequest::automatic; }
  /// Lightning's "no GPUs" short-circuit: 0, "0", "[]" (after strip) or an empty list.
  constexpr bool selects_none() const { return request_ == DeviceRequest::none; }
  /// Whether the spec asks for every available device (-1, "-1").
  constexpr bool selects_all() const { return request_ == DeviceRequest::all; }
  /// The count of DeviceRequest::count (may be negative or, for the string "00", zero).
  constexpr int count() const { return count_; }

  /// The ids this spec names without asking the machine: the explicit list, or 0..n-1 for a count n
  /// (empty for n <= 0). Throws std::logic_error (a compile error in constant evaluation) for "auto",
  /// "all", "none" and counts above volt::max_device_ids.
  constexpr DeviceIds ids() const {
    if (request_ == DeviceRequest::ids) return ids_;
    if (request_ == DeviceRequest::count && count_ <= max_device_ids) {
      DeviceIds range;
      for (int id = 0; id < count_; ++id) range.values_[range.size_++] = id;
      return range;
    }
    detail::device_ids_of_a_non_list_spec();
  }

  /// How many devices the spec asks for when that does not depend on the machine: nullopt for "auto"
  /// and "all"; 0 for "none" and for counts <= 0.
  constexpr std::optional<int> known_device_count() const {
    switch (request_) {
      case DeviceRequest::none: return 0;
      case DeviceRequest::count: return count_ > 0 ? count_ : 0;
      case DeviceRequest::ids: return ids_.size();
      default: return std::nullopt;
    }
  }

  /// The original text of a string spec (cut at volt::max_device_spec_text characters).
  constexpr std::string_view text() const { return {text_, static_cast<std::size_t>(text_size_)}; }
  /// Whether text() was cut at volt::max_device_spec_text characters.
  constexpr bool text_truncated() const { return text_truncated_; }
  /// The CPU parser's view of a string spec (`s.strip().isdigit()`).
  constexpr bool text_is_digits() const { return text_is_digits_; }
  /// Whether Python's int() refuses the text although text_is_digits() holds (digits padded with the separator
  /// characters that str.strip() removes but int() keeps, such as `"\x1c3"`); the CPU parser then throws as
  /// Lightning's does.
  constexpr bool cpu_int_rejects_text() const { return cpu_int_rejects_text_; }

  /// The value as Python's repr() would print what Lightning received: `2`, `'0,2'`, `[0, 2]`, `'auto'`.
  std::string python_repr() const;

  /// The value as a volt user writes it in the options: `2`, `"0,2"`, `volt::devices({0, 2})`, `volt::DeviceSpec{}`.
  std::string cpp_expression() const;

  /// Member-wise equality: the same form, request, count, ids and kept text.
  friend constexpr bool operator==(const DeviceSpec&, const DeviceSpec&) = default;

 private:
  std::string list_repr() const;

  constexpr void keep_text(std::string_view text) {
    const std::size_t kept = text.size() < static_cast<std::size_t>(max_device_spec_text)
                                 ? text.size()
                                 : static_cast<std::size_t>(max_device_spec_text);
    for (std::size_t i = 0; i < kept; ++i) text_[i] = text[i];
    text_size_ = static_cast<int>(kept);
    text_truncated_ = kept < text.size();
  }

  // Lightning: short-circuit on strip() in ("0", "[]"); "-1" exactly; a comma makes a list of
  // int(piece.strip()) over the non-empty pieces (empty *before* stripping); otherwise int(text.strip()).
  constexpr void parse_string(std::string_view text) {
    const std::string_view stripped = detail::python_strip(text);
    text_is_digits_ = !stripped.empty();
    for (char c : stripped) text_is_digits_ = text_is_digits_ && detail::is_ascii_digit(c);
    if (text_is_digits_) {
      // The CPU parser calls int(text) on the unstripped text; int() does not strip \x1c-\x1f.
      for (std::size_t i = 0; i < text.size() && !detail::is_ascii_digit(text[i]); ++i) {
        cpu_int_rejects_text_ = cpu_int_rejects_text_ || !detail::is_c_space(text[i]);
      }
      for (std::size_t i = text.size(); i > 0 && !detail::is_ascii_digit(text[i - 1]); --i) {
        cpu_int_rejects_text_ = cpu_int_rejects_text_ || !detail::is_c_space(text[i - 1]);
      }
    }
    if (stripped == "0" || stripped == "[]") {
      request_ = DeviceRequest::none;
      count_ = 0;
      return;
    }
    if (text.find(',') != std::string_view::npos) {
      parse_id_list(text);
      return;
    }
    const detail::ParsedInt parsed = detail::python_int(stripped);
    if (parsed.status == detail::IntParse::invalid_literal) detail::invalid_literal_for_int_with_base_10(stripped);
    if (parsed.status == detail::IntParse::out_of_range) detail::device_number_outside_int_range(stripped);
    count_ = parsed.value;
    request_ = count_ == -1 ? DeviceRequest::all : DeviceRequest::count;
  }

  constexpr void parse_id_list(std::string_view text) {
    request_ = DeviceRequest::ids;
    // Python evaluates every piece in order and stops at the first invalid literal; volt's own limits
    // (int range, capacity) are reported only when every piece is a valid literal.
    std::string_view first_out_of_range;
    bool any_out_of_range = false;
    std::size_t pieces = 0;
    std::size_t start = 0;
    while (start <= text.size()) {
      std::size_t comma = text.find(',', start);
      if (comma == std::string_view::npos) comma = text.size();
      const std::string_view piece = text.substr(start, comma - start);
      start = comma + 1;
      if (piece.empty()) continue;
      const std::string_view stripped = detail::python_strip(piece);
      const detail::ParsedInt parsed = detail::python_int(stripped);
      if (parsed.status == detail::IntParse::invalid_literal) detail::invalid_literal_for_int_with_base_10(stripped);
      if (parsed.status == detail::IntParse::out_of_range && !any_out_of_range) {
        any_out_of_range = true;
        first_out_of_range = stripped;
      }
      if (pieces < static_cast<std::size_t>(max_device_ids)) ids_.values_[ids_.size_++] = parsed.value;
      ++pieces;
    }
    if (any_out_of_range) detail::device_number_outside_int_range(first_out_of_range);
    if (pieces > static_cast<std::size_t>(max_device_ids)) detail::too_many_device_ids(pieces);
    if (std::is_constant_evaluated() && request_ == DeviceRequest::ids && ids_.has_duplicates()) {
      detail::device_ids_must_be_unique();
    }
  }
};

/// Same as the DeviceSpec constructors: volt::devices(2), volt::devices("0,2"), volt::devices(-1).
constexpr DeviceSpec devices(DeviceSpec spec) { return spec; }

/// A list of device ids: volt::devices({0, 2}). (A list constructor on DeviceSpec would make
/// DeviceSpec{1} mean the list [1].) Throws std::invalid_argument for more than volt::max_device_ids ids.
constexpr DeviceSpec devices(std::initializer_list<int> ids) {
  return DeviceSpec::from_ids(std::span<const int>(ids.begin(), ids.size()));
}

}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/accelerators/impl/device_spec.ipp>
#endif

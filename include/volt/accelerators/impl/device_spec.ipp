/// \file
/// Definitions of the functions declared in volt/accelerators/device_spec.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt {

VOLT_INLINE std::string DeviceSpec::python_repr() const {
  switch (form_) {
    case DeviceSpecForm::automatic: return "'auto'";
    case DeviceSpecForm::integer: return std::to_string(count_);
    case DeviceSpecForm::string: return detail::python_repr(text()) + (text_truncated_ ? "..." : "");
    case DeviceSpecForm::id_list: break;
  }
  return list_repr();
}

VOLT_INLINE std::string DeviceSpec::cpp_expression() const {
  switch (form_) {
    case DeviceSpecForm::automatic: return "volt::DeviceSpec{}";
    case DeviceSpecForm::integer: return std::to_string(count_);
    case DeviceSpecForm::string: {
      std::string repr = detail::python_repr(text());
      if (repr.front() == '\'') {
        repr.front() = '"';
        repr.back() = '"';
      }
      return repr + (text_truncated_ ? "..." : "");
    }
    case DeviceSpecForm::id_list: break;
  }
  std::string list = list_repr();
  return "volt::devices({" + list.substr(1, list.size() - 2) + "})";
}

VOLT_INLINE std::string DeviceSpec::list_repr() const {
  std::string out = "[";
  for (int i = 0; i < ids_.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(ids_[i]);
  }
  return out + "]";
}

}  // namespace volt

namespace volt::detail {

[[noreturn]] VOLT_INLINE void invalid_literal_for_int_with_base_10(std::string_view stripped_piece) {
  throw std::invalid_argument("invalid literal for int() with base 10: " + python_repr(stripped_piece) + " (" +
                              std::string(device_spec_grammar) + ")");
}

[[noreturn]] VOLT_INLINE void device_number_outside_int_range(std::string_view stripped_piece) {
  throw std::invalid_argument("volt: the number " + python_repr(stripped_piece) +
                              " in a device spec does not fit in an int (" + std::string(device_spec_grammar) + ")");
}

[[noreturn]] VOLT_INLINE void device_count_outside_int_range(long long count) {
  throw std::invalid_argument("volt: the device count " + std::to_string(count) + " does not fit in an int");
}

[[noreturn]] VOLT_INLINE void too_many_device_ids(std::size_t count) {
  throw std::invalid_argument("volt: a device spec holds at most " + std::to_string(max_device_ids) +
                              " device ids, got " + std::to_string(count));
}

[[noreturn]] VOLT_INLINE std::string_view null_device_spec_text() {
  throw std::invalid_argument("Device IDs (GPU/TPU) must be an int, a string, a sequence of ints, but you passed None");
}

[[noreturn]] VOLT_INLINE void device_ids_must_be_unique() {
  throw std::invalid_argument("Device ID's (GPU) must be unique.");
}

[[noreturn]] VOLT_INLINE void device_ids_of_a_non_list_spec() {
  throw std::logic_error(
      "volt: DeviceSpec::ids() needs a list of ids or a count of at most volt::max_device_ids; "
      "check request() first");
}

}  // namespace volt::detail

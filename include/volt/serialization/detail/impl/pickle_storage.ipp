/// \file
/// Definitions of the functions declared in volt/serialization/detail/pickle_storage.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail::pickle {

VOLT_INLINE std::string storage_class(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::ScalarType::Float: return "FloatStorage";
    case c10::ScalarType::Double: return "DoubleStorage";
    case c10::ScalarType::Half: return "HalfStorage";
    case c10::ScalarType::BFloat16: return "BFloat16Storage";
    case c10::ScalarType::Long: return "LongStorage";
    case c10::ScalarType::Int: return "IntStorage";
    case c10::ScalarType::Short: return "ShortStorage";
    case c10::ScalarType::Char: return "CharStorage";
    case c10::ScalarType::Byte: return "ByteStorage";
    case c10::ScalarType::Bool: return "BoolStorage";
    case c10::ScalarType::ComplexFloat: return "ComplexFloatStorage";
    case c10::ScalarType::ComplexDouble: return "ComplexDoubleStorage";
    default: break;
  }
  throw std::invalid_argument(std::string("volt: tensors of dtype ") + c10::toString(dtype) +
                              " cannot be saved in a weights file (supported: float32, float64, float16, bfloat16, "
                              "int64, int32, int16, int8, uint8, bool, complex64, complex128)");
}

VOLT_INLINE std::optional<c10::ScalarType> storage_dtype(std::string_view name) {
  static const std::map<std::string_view, c10::ScalarType> dtypes = {
      {"FloatStorage", c10::ScalarType::Float},      {"DoubleStorage", c10::ScalarType::Double},
      {"HalfStorage", c10::ScalarType::Half},        {"BFloat16Storage", c10::ScalarType::BFloat16},
      {"LongStorage", c10::ScalarType::Long},        {"IntStorage", c10::ScalarType::Int},
      {"ShortStorage", c10::ScalarType::Short},      {"CharStorage", c10::ScalarType::Char},
      {"ByteStorage", c10::ScalarType::Byte},        {"BoolStorage", c10::ScalarType::Bool},
      {"ComplexFloatStorage", c10::ScalarType::ComplexFloat},
      {"ComplexDoubleStorage", c10::ScalarType::ComplexDouble}};
  const auto found = dtypes.find(name);
  if (found == dtypes.end()) return std::nullopt;
  return found->second;
}

}  // namespace volt::detail::pickle

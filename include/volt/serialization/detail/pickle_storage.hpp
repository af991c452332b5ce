/// \file
/// The storage class names of torch.save's pickles ("FloatStorage", ...) and their dtypes; implementation of
/// volt/serialization/pickle.hpp, no public API.
#pragma once

#include <volt/core/linkage.hpp>
#include <torch/torch.h>

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace volt::detail::pickle {

/// The storage class name torch.save writes for a dtype ("FloatStorage" for float32, ...).
VOLT_INLINE std::string storage_class(c10::ScalarType dtype);

/// The dtype of a storage class name ("FloatStorage" -> float32); std::nullopt for a name torch.save does
/// not write.
VOLT_INLINE std::optional<c10::ScalarType> storage_dtype(std::string_view name);

}  // namespace volt::detail::pickle

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/serialization/detail/impl/pickle_storage.ipp>
#endif

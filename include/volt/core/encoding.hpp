/// \file
/// Byte-level encodings several file formats share: CRC-32 (zip entries, PNG chunks) and JSON string escaping
/// (safetensors headers, MLflow's REST requests).
#pragma once

#include <volt/core/linkage.hpp>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace volt::detail {

/// CRC-32 with the reflected polynomial 0xEDB88320 (zip, PNG, gzip).
VOLT_INLINE std::uint32_t crc32(std::string_view bytes);

/// Appends `text` as a JSON string, escaped as Python's safetensors package (serde_json) writes it:
/// \" \\ \b \f \n \r \t, other control characters as \u00xx, everything else (UTF-8 included) as it is.
VOLT_INLINE void append_json_string(std::string& out, std::string_view text);

}  // namespace volt::detail

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/core/impl/encoding.ipp>
#endif

// volt's version, as macros (for #if) and as constants.
#pragma once

#define VOLT_VERSION_MAJOR 0
#define VOLT_VERSION_MINOR 1
#define VOLT_VERSION_PATCH 0
#define VOLT_VERSION_STRING "0.1.0"

namespace volt {
/// The library's version, "MAJOR.MINOR.PATCH".
inline constexpr const char* version = VOLT_VERSION_STRING;
}  // namespace volt

/// \file
/// volt's version, as macros (for `#if`) and as constants.
#pragma once

/// The major version: changes when a release breaks the API.
#define VOLT_VERSION_MAJOR 0
/// The minor version.
#define VOLT_VERSION_MINOR 1
/// The patch version.
#define VOLT_VERSION_PATCH 0
/// The version as "MAJOR.MINOR.PATCH".
#define VOLT_VERSION_STRING "0.1.0"

namespace volt {
/// The library's version, "MAJOR.MINOR.PATCH".
inline constexpr const char* version = VOLT_VERSION_STRING;
}  // namespace volt

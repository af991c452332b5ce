/// \file
/// Definitions of the functions declared in volt/profilers.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

#include <volt/core/errors.hpp>

#include <cctype>
#include <string>

namespace volt::detail {

VOLT_INLINE std::shared_ptr<Profiler> make_profiler(std::string_view given) {
  if (given.empty()) return nullptr;
  std::string name(given);  // Lightning lowercases the name ("Simple" is "simple")
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (name == "simple") return std::make_shared<SimpleProfiler>();
  if (name == "pytorch") return std::make_shared<PyTorchProfiler>();
  if (name == "advanced" || name == "xla") {
    throw MisconfigurationError("volt: `profiler=\"" + std::string(name) +
                                "\"` (Lightning's AdvancedProfiler / XLAProfiler) is not available in volt; use "
                                "\"simple\" or \"pytorch\"");
  }
  throw MisconfigurationError("When passing string value for the `profiler` parameter of `Trainer`, it can only be one "
                              "of ['simple', 'advanced', 'pytorch', 'xla']");
}

}  // namespace volt::detail

/// \file
/// The exception types volt throws.
///
/// Lightning's Trainer raises MisconfigurationException for a bad configuration; volt throws
/// volt::MisconfigurationError. Fabric-side errors use std::invalid_argument (Python's ValueError) and
/// std::runtime_error (RuntimeError), as Lightning's Fabric does.
#pragma once

#include <stdexcept>
#include <string>

namespace volt {

/// A configuration the Trainer cannot run with: an unavailable device, an invalid option value, a
/// malformed device list. Derives from std::runtime_error so `catch (const std::exception&)` sees it.
class MisconfigurationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace volt

/// \file
/// volt/testing: helpers for testing code that uses volt.
#pragma once

#include <volt/testing/scoped_machine.hpp>

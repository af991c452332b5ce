// The one translation unit of the volt::compiled library: it compiles the definitions of volt's functions that
// do not depend on a program's types (see volt/core/linkage.hpp). Programs that link volt::compiled get
// VOLT_SEPARATE_COMPILATION from the target and see only the declarations.
#ifndef VOLT_SEPARATE_COMPILATION
#error "src/volt.cpp is compiled with VOLT_SEPARATE_COMPILATION defined (CMake's volt::compiled target does it)"
#endif
#define VOLT_IMPLEMENTATION
#include <volt/volt.hpp>

# VOLT_SANITIZE=ON: volt's tests, examples and benchmarks (everything this project builds) are compiled and linked
# with AddressSanitizer and UndefinedBehaviorSanitizer. Any UB report aborts the program (no recovery), so a
# sanitizer finding fails the test that triggered it.
#
# LibTorch itself is not instrumented: ASan still checks every access volt's code makes (including inside
# inlined torch headers), and intercepts malloc/free for the whole process.
#
# Run-time options: `ctest` in a sanitized build folder sets ASAN_OPTIONS and UBSAN_OPTIONS to the
# values below unless the caller already set them (see docs/ci.md for why each is there).
if(NOT CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  message(FATAL_ERROR "VOLT_SANITIZE=ON needs GCC or Clang (compiler: ${CMAKE_CXX_COMPILER_ID})")
endif()

set(VOLT_SANITIZER_FLAGS -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)

include(CheckCXXSourceCompiles)
set(CMAKE_REQUIRED_FLAGS "${VOLT_SANITIZER_FLAGS}")
string(REPLACE ";" " " CMAKE_REQUIRED_FLAGS "${CMAKE_REQUIRED_FLAGS}")
set(CMAKE_REQUIRED_LINK_OPTIONS ${VOLT_SANITIZER_FLAGS})
check_cxx_source_compiles("int main() { return 0; }" VOLT_SANITIZERS_LINK)
unset(CMAKE_REQUIRED_FLAGS)
unset(CMAKE_REQUIRED_LINK_OPTIONS)
if(NOT VOLT_SANITIZERS_LINK)
  message(FATAL_ERROR "VOLT_SANITIZE=ON: ${CMAKE_CXX_COMPILER} cannot build with ${VOLT_SANITIZER_FLAGS} "
                      "(is libasan/libubsan installed?)")
endif()

# Directory-wide, so that every target of tests/, examples/ and benchmarks/ (and their extra.cmake programs)
# gets them; the compile-flag files the compile-fail and vendoring tests use carry them too.
add_compile_options(${VOLT_SANITIZER_FLAGS})
add_link_options(${VOLT_SANITIZER_FLAGS})
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  # GCC's -Wmaybe-uninitialized is unreliable with -fsanitize=address at -O2/-O3 (the GCC manual says so): with
  # g++ 12 it fires inside libstdc++ for LibTorch 1.13's DataLoader destructor (torch/data/dataloader/base.h),
  # which -Werror makes fatal. The unsanitized tree keeps the warning.
  add_compile_options(-Wno-maybe-uninitialized)
endif()

# detect_leaks=1: volt must not leak (LibTorch's process-lifetime allocations stay reachable: not reported).
# strict_init_order/check_initialization_order: static initialisation order bugs in volt's inline variables.
# detect_stack_use_after_return=1: references to a finished call's locals (callbacks, lambdas kept too long).
set(VOLT_ASAN_OPTIONS "detect_leaks=1:strict_init_order=1:check_initialization_order=1:detect_stack_use_after_return=1:halt_on_error=1")
set(VOLT_UBSAN_OPTIONS "print_stacktrace=1:halt_on_error=1:report_error_type=1")
file(WRITE ${CMAKE_BINARY_DIR}/volt_sanitizer_env.cmake
"# Written by cmake/sanitizers.cmake: run-time options for the sanitized tests (a caller's own values win).
foreach(pair \"ASAN_OPTIONS=${VOLT_ASAN_OPTIONS}\" \"UBSAN_OPTIONS=${VOLT_UBSAN_OPTIONS}\")
  string(FIND \"\${pair}\" \"=\" eq)
  string(SUBSTRING \"\${pair}\" 0 \${eq} name)
  math(EXPR eq \"\${eq} + 1\")
  string(SUBSTRING \"\${pair}\" \${eq} -1 value)
  if(NOT DEFINED ENV{\${name}})
    set(ENV{\${name}} \"\${value}\")
  endif()
endforeach()
")
set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${CMAKE_BINARY_DIR}/volt_sanitizer_env.cmake)
message(STATUS "volt: tests, examples and benchmarks built with ${VOLT_SANITIZER_FLAGS}")

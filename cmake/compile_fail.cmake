# Runs one compile-fail test: -DCOMPILER=... -DFLAGS=<response file> -DSOURCE=<snippet.cpp>
# -DIMPLICIT_INCLUDES=<the compiler's own include folders> [-DEXTRA_FLAGS=<more flags, one string>]
# The snippet's `// expect: <regex>` line gives the message the compiler must print.
include(${CMAKE_CURRENT_LIST_DIR}/read_flags.cmake)
volt_read_flags(flags "${FLAGS}" "${IMPLICIT_INCLUDES}")
# -DEXTRA_FLAGS="...": more flags, as one shell-quoted string (the precompiled header, with GCC).
if(EXTRA_FLAGS)
  separate_arguments(extra_flags UNIX_COMMAND "${EXTRA_FLAGS}")
  list(APPEND flags ${extra_flags})
endif()
file(STRINGS ${SOURCE} expect_lines REGEX "^// expect: ")
if(NOT expect_lines)
  message(FATAL_ERROR "${SOURCE} has no `// expect: <regex>` line")
endif()
list(GET expect_lines 0 expect_line)
string(REGEX REPLACE "^// expect: " "" expected "${expect_line}")

execute_process(COMMAND ${COMPILER} ${flags} -fsyntax-only ${SOURCE}
                RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(result EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled, but it must not")
endif()
if(NOT "${out}${err}" MATCHES "${expected}")
  message(FATAL_ERROR "${SOURCE} failed to compile, but without the expected message /${expected}/:\n${err}")
endif()
message(STATUS "failed to compile as expected, with /${expected}/")

file(READ ${SOURCE} text)
if(text MATCHES "VOLT_COMPILE_FAIL_CONTROL")
  execute_process(COMMAND ${COMPILER} ${flags} -fsyntax-only -DVOLT_COMPILE_FAIL_CONTROL ${SOURCE}
                  RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "the control variant of ${SOURCE} (VOLT_COMPILE_FAIL_CONTROL defined) must compile:\n${err}")
  endif()
  message(STATUS "control variant compiles")
endif()

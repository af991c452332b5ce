# Compile-fail checks (tests/CMakeLists.txt adds them to CTest):
#   cmake -DCOMPILER=... -DFLAGS=<response file> -DIMPLICIT_INCLUDES=<the compiler's own include folders>
#         [-DEXTRA_FLAGS=<more flags, one string>] -DSOURCE=<snippet.cpp> -P check.cmake
#     The snippet must fail to compile, and the first error the compiler reports (it stops there:
#     -Wfatal-errors) must match the snippet's `// expect: <regex>` line.
#   cmake ... -DCONTROLS=<source that includes every snippet> -DSNIPPETS=<the snippets> -P check.cmake
#     Every snippet's control variant (VOLT_COMPILE_FAIL_CONTROL defined) must compile: all of them in one
#     translation unit (each snippet keeps its code in a namespace of its own name), so that the failure of each
#     snippet is shown to come from its guarded line, not from a typo, for one compile instead of one per snippet.
include(${CMAKE_CURRENT_LIST_DIR}/../../cmake/read_flags.cmake)
volt_read_flags(flags "${FLAGS}" "${IMPLICIT_INCLUDES}")
if(EXTRA_FLAGS)
  separate_arguments(extra_flags UNIX_COMMAND "${EXTRA_FLAGS}")
  list(APPEND flags ${extra_flags})
endif()

if(CONTROLS)
  foreach(snippet IN LISTS SNIPPETS)
    file(READ ${snippet} text)
    if(NOT text MATCHES "VOLT_COMPILE_FAIL_CONTROL")
      message(FATAL_ERROR "${snippet} has no control variant (#ifdef VOLT_COMPILE_FAIL_CONTROL)")
    endif()
    get_filename_component(name ${snippet} NAME_WE)
    if(NOT text MATCHES "namespace ${name} {")
      message(FATAL_ERROR "${snippet} must keep its code in `namespace ${name} { ... }` (it is compiled "
                          "together with the other snippets' control variants)")
    endif()
  endforeach()
  execute_process(COMMAND ${COMPILER} ${flags} -fsyntax-only ${CONTROLS}
                  RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "the control variants (VOLT_COMPILE_FAIL_CONTROL defined) must compile:\n${out}${err}")
  endif()
  list(LENGTH SNIPPETS count)
  message(STATUS "the control variants of the ${count} snippets compile")
  return()
endif()

file(STRINGS ${SOURCE} expect_lines REGEX "^// expect: ")
if(NOT expect_lines)
  message(FATAL_ERROR "${SOURCE} has no `// expect: <regex>` line")
endif()
list(GET expect_lines 0 expect_line)
string(REGEX REPLACE "^// expect: " "" expected "${expect_line}")

execute_process(COMMAND ${COMPILER} ${flags} -fsyntax-only -Wfatal-errors ${SOURCE}
                RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(text "${out}${err}")
if(result EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled, but it must not")
endif()
# The error itself: the first line that says "error:" (the lines before it give its context).
string(REGEX MATCH "[^\n]*error:[^\n]*" first_error "${text}")
if(NOT first_error MATCHES "${expected}")
  message(FATAL_ERROR "${SOURCE} failed to compile, but its first error is not /${expected}/:\n${text}")
endif()
message(STATUS "failed to compile as expected, first error: /${expected}/")

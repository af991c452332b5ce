# Runs COMMAND (a ;-list) and checks its exit status is STATUS and its output (stdout and stderr) matches
# the regular expression MESSAGE. Used by the examples' bad-input tests:
#   cmake -DCOMMAND="prog|--flag|value" -DSTATUS=2 -DMESSAGE="regex" -P expect_exit.cmake
string(REPLACE "|" ";" COMMAND "${COMMAND}")
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status STREQUAL STATUS)
  message(FATAL_ERROR "expected exit status ${STATUS}, got ${status}\nstdout:\n${out}\nstderr:\n${err}")
endif()
if(NOT "${out}${err}" MATCHES "${MESSAGE}")
  message(FATAL_ERROR "the output does not match \"${MESSAGE}\"\nstdout:\n${out}\nstderr:\n${err}")
endif()
message(STATUS "exit status ${status}; output matches")

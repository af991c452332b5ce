# Reliability programs (included from tests/CMakeLists.txt; VOLT_TEST_TARGET and VOLT_WARNINGS are in scope).

# Exact resume under SIGKILL: 10 trainings killed at random steps (fixed seed), each resumed from its last
# checkpoint and compared byte for byte with an uninterrupted run.
if(UNIX)
  add_executable(volt_reliability_sigkill ${CMAKE_CURRENT_LIST_DIR}/programs/sigkill_resume.cpp)
  target_link_libraries(volt_reliability_sigkill PRIVATE ${VOLT_TEST_TARGET})
  target_compile_options(volt_reliability_sigkill PRIVATE ${VOLT_WARNINGS})
  add_test(NAME volt.reliability.sigkill_resume
           COMMAND volt_reliability_sigkill drive ${CMAKE_CURRENT_BINARY_DIR}/sigkill-resume 10)
  set_tests_properties(volt.reliability.sigkill_resume PROPERTIES LABELS "reliability" TIMEOUT 900)
endif()

# A short libFuzzer run of the checkpoint loader when clang with libFuzzer is available (label fuzz).
include(${PROJECT_SOURCE_DIR}/fuzz/fuzz_tests.cmake OPTIONAL)

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

# The fault campaign's short form on the Fashion-MNIST MLP example (tests/reliability/fault_campaign.py): 6 SIGKILLs
# over chains of resumes compared with an uninterrupted run, and the checkpoint and log folders on a full and a
# read-only tmpfs (skipped with a printed reason where mounting is not allowed). Exit 77 (skip): no Fashion-MNIST
# data. The full form (50 kills) is run by hand: benchmarks/results/fault-campaign.md.
find_package(Python3 COMPONENTS Interpreter)
if(UNIX AND VOLT_BUILD_EXAMPLES AND Python3_Interpreter_FOUND)
  add_test(NAME volt.reliability.fault_campaign_short
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/fault_campaign.py --short
                   --example $<TARGET_FILE:fashion_mnist> --work-dir ${CMAKE_CURRENT_BINARY_DIR}/fault-campaign)
  set_tests_properties(volt.reliability.fault_campaign_short PROPERTIES LABELS "reliability" TIMEOUT 600
                       SKIP_RETURN_CODE 77 ENVIRONMENT "CUDA_VISIBLE_DEVICES=")
endif()

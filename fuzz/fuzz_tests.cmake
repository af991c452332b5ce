# A short libFuzzer run of the checkpoint loader as a CTest test (label "fuzz"), when clang++ with libFuzzer's
# runtime is installed. Included from tests/reliability/extra.cmake. The long runs are recorded in
# benchmarks/results/fuzz_checkpoint.md (fuzz/run_checkpoint_fuzzer.sh 1000000).
find_program(VOLT_FUZZ_CLANGXX NAMES clang++ clang++-19 clang++-18 clang++-17 clang++-16 clang++-15 clang++-14)
if(VOLT_FUZZ_CLANGXX AND UNIX)
  execute_process(COMMAND ${VOLT_FUZZ_CLANGXX} -print-file-name=libclang_rt.fuzzer-x86_64.a
                  OUTPUT_VARIABLE volt_fuzz_runtime OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(volt_fuzz_runtime AND IS_ABSOLUTE "${volt_fuzz_runtime}" AND EXISTS "${volt_fuzz_runtime}")
    set(volt_fuzz_env "VOLT_FUZZ_OUT=${CMAKE_BINARY_DIR}/fuzz" "ASAN_OPTIONS=detect_leaks=0")
    if(DEFINED TORCH_INSTALL_PREFIX AND NOT TORCH_INSTALL_PREFIX STREQUAL "/usr")
      list(APPEND volt_fuzz_env "VOLT_TORCH_PREFIX=${TORCH_INSTALL_PREFIX}")
    endif()
    add_test(NAME volt.fuzz.checkpoint_short
             COMMAND sh ${PROJECT_SOURCE_DIR}/fuzz/run_checkpoint_fuzzer.sh 3000 -seed=1)
    set_tests_properties(volt.fuzz.checkpoint_short PROPERTIES LABELS "fuzz" TIMEOUT 900
                         ENVIRONMENT "${volt_fuzz_env}")
  else()
    message(STATUS "volt: clang++ without libFuzzer's runtime; the fuzz tests are not added")
  endif()
else()
  message(STATUS "volt: no clang++; the fuzz tests are not added")
endif()

# Short libFuzzer runs as CTest tests (label "fuzz"), added when clang++ with libFuzzer's runtime is installed.
# Included from tests/reliability/extra.cmake. The long runs are recorded in benchmarks/results/
# (fuzz_checkpoint.md: fuzz/run_checkpoint_fuzzer.sh 1000000; fuzz_cli.md: fuzz/run_cli_fuzzer.sh 10000000;
# fuzz_device_spec.md: fuzz/run_device_spec_fuzzer.sh 10000000;
# safetensors-fuzz.md: fuzz/run_safetensors_fuzzer.sh 1000000).

# Whether `compiler` has libFuzzer's runtime; sets `result` to TRUE or FALSE.
function(volt_fuzz_has_runtime compiler result)
  execute_process(COMMAND ${compiler} -print-file-name=libclang_rt.fuzzer-x86_64.a
                  OUTPUT_VARIABLE runtime OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(runtime AND IS_ABSOLUTE "${runtime}" AND EXISTS "${runtime}")
    set(${result} TRUE PARENT_SCOPE)
  else()
    set(${result} FALSE PARENT_SCOPE)
  endif()
endfunction()

set(volt_fuzz_env "ASAN_OPTIONS=detect_leaks=0")
set(volt_fuzz_venv_torch FALSE)
if(DEFINED TORCH_INSTALL_PREFIX AND NOT TORCH_INSTALL_PREFIX STREQUAL "/usr")
  list(APPEND volt_fuzz_env "VOLT_TORCH_PREFIX=${TORCH_INSTALL_PREFIX}")
  set(volt_fuzz_venv_torch TRUE)
endif()

# The checkpoint loader (C++17: any clang++ with libFuzzer, clang 14 included).
find_program(VOLT_FUZZ_CLANGXX NAMES clang++ clang++-19 clang++-18 clang++-17 clang++-16 clang++-15 clang++-14)
if(VOLT_FUZZ_CLANGXX AND UNIX)
  volt_fuzz_has_runtime(${VOLT_FUZZ_CLANGXX} volt_fuzz_runtime_found)
  if(volt_fuzz_runtime_found)
    add_test(NAME volt.fuzz.checkpoint_short
             COMMAND sh ${PROJECT_SOURCE_DIR}/fuzz/run_checkpoint_fuzzer.sh 3000 -seed=1)
    set_tests_properties(volt.fuzz.checkpoint_short PROPERTIES LABELS "fuzz" TIMEOUT 900
                         ENVIRONMENT "VOLT_FUZZ_OUT=${CMAKE_BINARY_DIR}/fuzz;${volt_fuzz_env}")
    # The device-spec parser (headers without LibTorch): a short run, 20000 inputs (a few seconds).
    add_test(NAME volt.fuzz.device_spec_short
             COMMAND sh ${PROJECT_SOURCE_DIR}/fuzz/run_device_spec_fuzzer.sh 20000 -seed=1)
    set_tests_properties(volt.fuzz.device_spec_short PROPERTIES LABELS "fuzz" TIMEOUT 600
                         ENVIRONMENT "VOLT_FUZZ_OUT=${CMAKE_BINARY_DIR}/fuzz-device-spec;${volt_fuzz_env}")
  else()
    message(STATUS "volt: clang++ without libFuzzer's runtime; the checkpoint fuzz test is not added")
  endif()
else()
  message(STATUS "volt: no clang++; the fuzz tests are not added")
endif()

# The command-line parser: volt/cli/args.hpp includes LibTorch, whose headers need clang >= 15 in C++20, and
# the LibTorch must be one the script can be pointed at (not Debian's 1.13 in /usr, which clang 19 also rejects).
find_program(VOLT_FUZZ_CLANGXX_CXX20 NAMES clang++-19 clang++-18 clang++-17 clang++-16 clang++-15 clang++)
if(VOLT_FUZZ_CLANGXX_CXX20 AND UNIX AND volt_fuzz_venv_torch)
  execute_process(COMMAND ${VOLT_FUZZ_CLANGXX_CXX20} -dumpversion
                  OUTPUT_VARIABLE volt_fuzz_clang_version OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  volt_fuzz_has_runtime(${VOLT_FUZZ_CLANGXX_CXX20} volt_fuzz_runtime_found)
  if(volt_fuzz_clang_version VERSION_GREATER_EQUAL 15 AND volt_fuzz_runtime_found)
    add_test(NAME volt.fuzz.cli_short COMMAND sh ${PROJECT_SOURCE_DIR}/fuzz/run_cli_fuzzer.sh 20000 -seed=1)
    set_tests_properties(volt.fuzz.cli_short PROPERTIES LABELS "fuzz" TIMEOUT 900
                         ENVIRONMENT "VOLT_FUZZ_OUT=${CMAKE_BINARY_DIR}/fuzz;VOLT_FUZZ_CXX=${VOLT_FUZZ_CLANGXX_CXX20};${volt_fuzz_env}")
    # The safetensors reader (volt/serialization/safetensors.hpp), same compiler and LibTorch.
    add_test(NAME volt.fuzz.safetensors_short COMMAND sh ${PROJECT_SOURCE_DIR}/fuzz/run_safetensors_fuzzer.sh 20000 -seed=1)
    set_tests_properties(volt.fuzz.safetensors_short PROPERTIES LABELS "fuzz" TIMEOUT 900
                         ENVIRONMENT "VOLT_FUZZ_OUT=${CMAKE_BINARY_DIR}/fuzz;VOLT_FUZZ_CXX=${VOLT_FUZZ_CLANGXX_CXX20};${volt_fuzz_env}")
  else()
    message(STATUS "volt: no clang++ >= 15 with libFuzzer's runtime; the command-line and safetensors fuzz tests are not added")
  endif()
elseif(UNIX)
  message(STATUS "volt: the command-line and safetensors fuzz tests need clang++ >= 15 and a LibTorch outside /usr; not added")
endif()

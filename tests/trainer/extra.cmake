# volt::PyTorchProfiler's Chrome trace of a Fashion-MNIST fit, loaded by Python's json
# (tests/python/check_profiler_trace.py, with the helper tests/trainer/interop/profile_tool.cpp). Only where
# VOLT_PYTHON names a Python; the test reports a skip when Fashion-MNIST is not installed.
if(VOLT_PYTHON)
  add_executable(volt_profile_tool ${CMAKE_CURRENT_LIST_DIR}/interop/profile_tool.cpp)
  target_link_libraries(volt_profile_tool PRIVATE ${VOLT_TEST_TARGET})
  target_include_directories(volt_profile_tool PRIVATE ${PROJECT_SOURCE_DIR}/examples/common)
  target_compile_options(volt_profile_tool PRIVATE ${VOLT_WARNINGS})
  target_precompile_headers(volt_profile_tool REUSE_FROM volt_test_pch)
  add_test(NAME volt.trainer.profiler_trace_python
           COMMAND ${VOLT_PYTHON} ${PROJECT_SOURCE_DIR}/tests/python/check_profiler_trace.py
                   --tool $<TARGET_FILE:volt_profile_tool> --workdir ${CMAKE_CURRENT_BINARY_DIR}/profiler_trace_python)
  set_tests_properties(volt.trainer.profiler_trace_python PROPERTIES LABELS python SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()

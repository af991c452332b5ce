# TensorBoard event files read by Python's tensorboard package (tests/python/check_tensorboard.py); a skip when
# VOLT_PYTHON lacks tensorboard.
volt_python_interop_test(volt_tensorboard_tool ${CMAKE_CURRENT_LIST_DIR}/interop/tensorboard_tool.cpp
                         volt.loggers.tensorboard_python check_tensorboard.py)

# MLFlowLogger against a real MLflow tracking server (tests/python/check_mlflow.py starts `mlflow server` once on
# 127.0.0.1). Needs libcurl (Debian: libcurl4-openssl-dev); the ctest test reports a skip when VOLT_PYTHON lacks
# mlflow. The tool includes the optional header from the tree's form of volt (include/, or its single_include/
# companion). Where the examples are built, the same server also takes a Fashion-MNIST run with --mlflow-uri.
find_package(CURL QUIET)
if(CURL_FOUND)
  add_executable(volt_mlflow_tool EXCLUDE_FROM_ALL ${CMAKE_CURRENT_LIST_DIR}/interop/mlflow_tool.cpp)
  target_link_libraries(volt_mlflow_tool PRIVATE ${VOLT_TEST_TARGET} CURL::libcurl)
  target_compile_options(volt_mlflow_tool PRIVATE ${VOLT_WARNINGS})
  if(VOLT_PYTHON)
    set_target_properties(volt_mlflow_tool PROPERTIES EXCLUDE_FROM_ALL OFF)
    set(volt_mlflow_example "")
    if(VOLT_BUILD_EXAMPLES)
      set(volt_mlflow_example --example $<TARGET_FILE:fashion_mnist>)
    endif()
    add_test(NAME volt.loggers.mlflow_python
             COMMAND ${VOLT_PYTHON} ${PROJECT_SOURCE_DIR}/tests/python/check_mlflow.py
                     --tool $<TARGET_FILE:volt_mlflow_tool> --workdir ${CMAKE_CURRENT_BINARY_DIR}/mlflow_python
                     ${volt_mlflow_example})
    set_tests_properties(volt.loggers.mlflow_python PROPERTIES LABELS python SKIP_RETURN_CODE 77 TIMEOUT 300)
  endif()
else()
  message(STATUS "volt: libcurl not found; the MLFlowLogger test is not added")
endif()

# Weights exchanged with Python: set VOLT_PYTHON to a Python with torch (e.g. -DVOLT_PYTHON=/opt/volt-venv/bin/python)
# to test that torch.load reads volt's files and volt reads torch.save's (tests/python/check_weights.py).
set(VOLT_PYTHON "" CACHE FILEPATH "A Python interpreter with torch, for the tests that exchange files with Python")
add_executable(volt_weights_tool EXCLUDE_FROM_ALL ${CMAKE_CURRENT_LIST_DIR}/interop/weights_tool.cpp)
target_link_libraries(volt_weights_tool PRIVATE ${VOLT_TEST_TARGET})
target_compile_options(volt_weights_tool PRIVATE ${VOLT_WARNINGS})
if(VOLT_PYTHON)
  set_target_properties(volt_weights_tool PROPERTIES EXCLUDE_FROM_ALL OFF)
  add_test(NAME volt.serialization.python
           COMMAND ${VOLT_PYTHON} ${PROJECT_SOURCE_DIR}/tests/python/check_weights.py
                   --tool $<TARGET_FILE:volt_weights_tool> --workdir ${CMAKE_CURRENT_BINARY_DIR}/serialization_python)
  set_tests_properties(volt.serialization.python PROPERTIES LABELS python TIMEOUT 300)
endif()

# safetensors files exchanged with Python's safetensors package (tests/python/check_safetensors.py); the test
# reports a skip when VOLT_PYTHON lacks the package.
add_executable(volt_safetensors_tool EXCLUDE_FROM_ALL ${CMAKE_CURRENT_LIST_DIR}/interop/safetensors_tool.cpp)
target_link_libraries(volt_safetensors_tool PRIVATE ${VOLT_TEST_TARGET})
target_compile_options(volt_safetensors_tool PRIVATE ${VOLT_WARNINGS})
if(VOLT_PYTHON)
  set_target_properties(volt_safetensors_tool PROPERTIES EXCLUDE_FROM_ALL OFF)
  add_test(NAME volt.serialization.safetensors_python
           COMMAND ${VOLT_PYTHON} ${PROJECT_SOURCE_DIR}/tests/python/check_safetensors.py
                   --tool $<TARGET_FILE:volt_safetensors_tool> --workdir ${CMAKE_CURRENT_BINARY_DIR}/safetensors_python)
  set_tests_properties(volt.serialization.safetensors_python PROPERTIES LABELS python SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()

# Checkpoints exchanged with Python and Lightning (tests/python/check_checkpoint.py): torch.load(weights_only=True)
# opens a volt checkpoint and its state_dict loads strictly into the same model in PyTorch; a Lightning
# checkpoint's state_dict loads into volt. The Lightning part reports a skip when VOLT_PYTHON lacks lightning.
add_executable(volt_checkpoint_tool EXCLUDE_FROM_ALL ${CMAKE_CURRENT_LIST_DIR}/interop/checkpoint_tool.cpp)
target_link_libraries(volt_checkpoint_tool PRIVATE ${VOLT_TEST_TARGET})
target_compile_options(volt_checkpoint_tool PRIVATE ${VOLT_WARNINGS})
if(VOLT_PYTHON)
  set_target_properties(volt_checkpoint_tool PROPERTIES EXCLUDE_FROM_ALL OFF)
  add_test(NAME volt.serialization.checkpoint_python
           COMMAND ${VOLT_PYTHON} ${PROJECT_SOURCE_DIR}/tests/python/check_checkpoint.py
                   --tool $<TARGET_FILE:volt_checkpoint_tool> --workdir ${CMAKE_CURRENT_BINARY_DIR}/checkpoint_python)
  set_tests_properties(volt.serialization.checkpoint_python PROPERTIES LABELS python TIMEOUT 300)
endif()

# The documentation's code blocks and commands (README.md, examples/README.md, docs/troubleshooting.md), each
# compiled, run or checked against the test that runs it by tools/check-docs.py (its header says how).
# Included from tests/CMakeLists.txt, with its variables in scope. The commands run the examples, so the check
# belongs to a tree that builds them; its C++ is compiled with LibTorch's own flags (torch_flags.rsp, written
# by tests/CMakeLists.txt) and the volt headers this tree tests.
find_package(Python3 COMPONENTS Interpreter)
if(VOLT_BUILD_EXAMPLES AND Python3_Interpreter_FOUND)
  if(VOLT_TEST_SINGLE_HEADER)
    set(volt_docs_headers ${PROJECT_SOURCE_DIR}/single_include)
  else()
    set(volt_docs_headers ${PROJECT_SOURCE_DIR}/include)
  endif()
  get_filename_component(volt_docs_torch_lib_dir ${TORCH_LIBRARY} DIRECTORY)
  add_test(NAME volt.docs.code_blocks
           COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tools/check-docs.py
                   --source-dir ${PROJECT_SOURCE_DIR} --build-dir ${CMAKE_BINARY_DIR}
                   --work-dir ${CMAKE_CURRENT_BINARY_DIR}/docs-check --compiler ${CMAKE_CXX_COMPILER}
                   --torch-flags ${CMAKE_CURRENT_BINARY_DIR}/torch_flags.rsp
                   "--implicit-includes=${CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES}"
                   --volt-include ${volt_docs_headers} --torch-lib-dir ${volt_docs_torch_lib_dir}
                   "--python=${VOLT_PYTHON}" --spec ${PROJECT_SOURCE_DIR}/../shared/spec/lightning-behaviour.md)
  # One compile of volt (about a minute on two cores) and short runs of the examples.
  set_tests_properties(volt.docs.code_blocks PROPERTIES LABELS docs TIMEOUT 1500)
endif()

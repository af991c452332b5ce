# Lightning as a differential oracle (issue 11): volt_oracle runs volt on cases that the Python drivers in
# tests/oracle/ also run through Lightning 2.6.6, and the drivers compare the two. The program is always built
# (so it compiles against every LibTorch CI uses); the tests need a Python with torch and lightning, given as
# -DVOLT_PYTHON=/path/to/python.
set(VOLT_PYTHON "" CACHE FILEPATH "Python interpreter with torch and lightning 2.6.6, for the Lightning oracle tests")

add_executable(volt_oracle ${CMAKE_CURRENT_SOURCE_DIR}/oracle/volt_oracle.cpp)
target_link_libraries(volt_oracle PRIVATE ${VOLT_TEST_TARGET})
target_compile_options(volt_oracle PRIVATE ${VOLT_WARNINGS})
target_precompile_headers(volt_oracle REUSE_FROM volt_test_pch)

set(volt_oracle_lightning OFF)
if(VOLT_PYTHON)
  execute_process(COMMAND ${VOLT_PYTHON} -c "import torch, lightning; print(lightning.__version__)"
                  RESULT_VARIABLE volt_oracle_probe OUTPUT_VARIABLE volt_oracle_lightning_version
                  ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(volt_oracle_probe EQUAL 0)
    set(volt_oracle_lightning ON)
  endif()
endif()

if(volt_oracle_lightning)
  message(STATUS "volt: Lightning oracle tests use ${VOLT_PYTHON} (lightning ${volt_oracle_lightning_version})")
  foreach(oracle devices transfer trainer)
    add_test(NAME volt.oracle.${oracle}
             COMMAND ${VOLT_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/oracle/${oracle}_oracle.py
                     --volt-oracle $<TARGET_FILE:volt_oracle>)
    set_tests_properties(volt.oracle.${oracle} PROPERTIES LABELS oracle TIMEOUT 900)
  endforeach()
else()
  message(STATUS "volt: Lightning oracle tests skipped (set VOLT_PYTHON to a Python that can import torch and "
                 "lightning; VOLT_PYTHON='${VOLT_PYTHON}')")
endif()

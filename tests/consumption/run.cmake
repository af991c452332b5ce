# Builds and runs tests/consumption/consumer/main.cpp against volt consumed one way (-DMODE=...):
#   install_find_package    cmake --install volt, then find_package(volt) from the install tree
#   add_subdirectory        add_subdirectory(<volt source>)
#   fetchcontent            FetchContent_Declare(volt URL <archive of volt's sources>), linking volt::compiled
#   vendored_single_header  copy single_include/volt/volt.hpp into the project and compile with a plain
#                           compiler command, no CMake
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(consumer ${VOLT_SOURCE_DIR}/tests/consumption/consumer)

function(run)
  execute_process(COMMAND ${ARGN} WORKING_DIRECTORY ${WORK_DIR} RESULT_VARIABLE result
                  OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT result EQUAL 0)
    string(REPLACE ";" " " command "${ARGN}")
    message(FATAL_ERROR "failed (${result}): ${command}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

# No CMAKE_BUILD_TYPE: the consumer compiles without optimisation (28 CPU s instead of 38 at Release's -O3); what
# is tested is how volt is found, compiled, linked and run.
set(common -G ${GENERATOR} -DTorch_DIR=${TORCH_DIR} -DCMAKE_CXX_COMPILER=${COMPILER})

if(MODE STREQUAL "install_find_package")
  run(${CMAKE_COMMAND} -S ${VOLT_SOURCE_DIR} -B ${WORK_DIR}/volt-build ${common}
      -DVOLT_BUILD_TESTS=OFF -DVOLT_BUILD_EXAMPLES=OFF -DCMAKE_INSTALL_PREFIX=${WORK_DIR}/prefix)
  run(${CMAKE_COMMAND} --install ${WORK_DIR}/volt-build)
  if(NOT EXISTS ${WORK_DIR}/prefix/include/volt/volt.hpp)
    message(FATAL_ERROR "the install tree has no include/volt/volt.hpp")
  endif()
  run(${CMAKE_COMMAND} -S ${consumer} -B ${WORK_DIR}/build ${common} -DVOLT_CONSUME=${MODE}
      -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix)
elseif(MODE STREQUAL "add_subdirectory")
  run(${CMAKE_COMMAND} -S ${consumer} -B ${WORK_DIR}/build ${common} -DVOLT_CONSUME=${MODE}
      -DVOLT_SOURCE_DIR=${VOLT_SOURCE_DIR})
elseif(MODE STREQUAL "fetchcontent")
  # FetchContent downloads and unpacks an archive of volt's sources, as from a release, here from a file.
  execute_process(COMMAND ${CMAKE_COMMAND} -E tar czf ${WORK_DIR}/volt-src.tar.gz CMakeLists.txt cmake include
                          single_include src
                  WORKING_DIRECTORY ${VOLT_SOURCE_DIR} RESULT_VARIABLE result)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "could not pack volt's sources")
  endif()
  run(${CMAKE_COMMAND} -S ${consumer} -B ${WORK_DIR}/build ${common} -DVOLT_CONSUME=${MODE}
      -DVOLT_ARCHIVE=${WORK_DIR}/volt-src.tar.gz)
elseif(MODE STREQUAL "vendored_single_header")
  # Only the generated header and LibTorch: the include/ tree must not be reachable.
  file(COPY ${VOLT_SOURCE_DIR}/single_include/volt/volt.hpp DESTINATION ${WORK_DIR}/vendor/volt)
  file(COPY ${consumer}/main.cpp DESTINATION ${WORK_DIR})
  include(${VOLT_SOURCE_DIR}/cmake/read_flags.cmake)
  volt_read_flags(flags "${FLAGS}" "${IMPLICIT_INCLUDES}")
  run(${COMPILER} ${flags} -I${WORK_DIR}/vendor main.cpp -o consumer
      -L${TORCH_LIB_DIR} -Wl,-rpath,${TORCH_LIB_DIR} -ltorch -ltorch_cpu -lc10)
  run(${WORK_DIR}/consumer)
  message(STATUS "${last_output}")
  return()
else()
  message(FATAL_ERROR "unknown MODE=${MODE}")
endif()

run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run(${WORK_DIR}/build/consumer)
if(NOT last_output MATCHES "volt [0-9.]+ consumed")
  message(FATAL_ERROR "the consumer printed something unexpected: ${last_output}")
endif()
message(STATUS "${last_output}")

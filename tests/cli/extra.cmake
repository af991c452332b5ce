# GCC 12 reports a false -Wrestrict (or -Wstringop-overflow, -Warray-bounds) inside std::string's operator+(const char*, std::string&&) at -O3 (GCC
# bug 105329) when it inlines volt's error messages (accelerators/connector.hpp) into this binary.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_GREATER_EQUAL 12
   AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(volt_test_cli PRIVATE -Wno-restrict -Wno-stringop-overflow -Wno-array-bounds)
endif()

# Config files (the optional volt/cli/config_file.hpp): its test joins volt_test_cli where yaml-cpp is found
# (Debian: libyaml-cpp-dev), and only then links yaml-cpp. The optional header is not part of the single header,
# so the test is built in the trees that test include/ (VOLT_TEST_SINGLE_HEADER=OFF).
if(NOT VOLT_TEST_SINGLE_HEADER)
  find_package(yaml-cpp QUIET)
endif()
if(TARGET yaml-cpp::yaml-cpp)
  set(volt_yaml_cpp yaml-cpp::yaml-cpp)
elseif(TARGET yaml-cpp)
  set(volt_yaml_cpp yaml-cpp)
endif()
if(volt_yaml_cpp)
  target_sources(volt_test_cli PRIVATE ${CMAKE_CURRENT_LIST_DIR}/yaml/config_file_test.cpp)
  target_link_libraries(volt_test_cli PRIVATE ${volt_yaml_cpp})
else()
  message(STATUS "volt: yaml-cpp not found or single-header tree; the config-file tests of volt_test_cli are not added")
endif()

# GCC 12 reports a false -Wrestrict (or -Wstringop-overflow) inside std::string's operator+(const char*, std::string&&) at -O3 (GCC
# bug 105329) when it inlines volt's error messages (accelerators/connector.hpp) into this binary.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_GREATER_EQUAL 12
   AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(volt_test_tuner PRIVATE -Wno-restrict -Wno-stringop-overflow)
endif()

// doctest's runner, shared by all test binaries. No test cases here, so LibTorch is not needed.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#!/usr/bin/env bash
# Builds volt's tests and examples and runs every test, against include/ and against the generated
# single_include/volt/volt.hpp. Installs missing Debian packages first.
#   tools/run-tests.sh            both trees, Debian's LibTorch
# Environment: BUILD_ROOT (default build/tests), CMAKE_PREFIX_PATH (another LibTorch), JOBS (default nproc).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh

echo "== single header in sync with include/"
python3 tools/amalgamate.py --check

build_root=${BUILD_ROOT:-build/tests}
jobs=${JOBS:-$(nproc)}
status=0
for tree in include single_include; do
  dir="$build_root/$tree"
  single=OFF
  [ "$tree" = single_include ] && single=ON
  echo "== build and test against $tree/ ($dir)"
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DVOLT_TEST_SINGLE_HEADER=$single >/dev/null
  cmake --build "$dir" -j "$jobs"
  # The ways of consuming volt do not depend on the tree under test, and the compile-fail snippets
  # check static_asserts whose text is the same in both trees: run them once, against include/.
  exclude=()
  [ "$tree" = single_include ] && exclude=(-LE "consumption|compile_fail|example_full")
  (cd "$dir" && ctest --output-on-failure -j "$jobs" "${exclude[@]}") || status=1
done
exit $status

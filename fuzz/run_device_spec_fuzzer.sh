#!/bin/sh
# Builds fuzz/device_spec_fuzzer.cpp with clang's libFuzzer and sanitizers, then runs it.
#   fuzz/run_device_spec_fuzzer.sh [runs] [extra libFuzzer flags...]   (default: 10000000 inputs)
# VOLT_FUZZ_OUT: the build folder (default build-fuzz).
# Needs clang and its runtime (Debian 12: apt-get install -y --no-install-recommends clang libclang-rt-14-dev).
set -eu
cd "$(dirname "$0")/.."
runs=${1:-10000000}
[ $# -gt 0 ] && shift
out=${VOLT_FUZZ_OUT:-build-fuzz}
mkdir -p "$out" "$out/corpus"
clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -Wall -Wextra -Werror -Iinclude fuzz/device_spec_fuzzer.cpp -o "$out/device_spec_fuzzer"
# New inputs go to build-fuzz/corpus; the checked-in seeds are read only.
"$out/device_spec_fuzzer" -runs="$runs" -max_len=256 -print_final_stats=1 "$@" \
  -dict=fuzz/device_spec.dict "$out/corpus" fuzz/corpus/device_spec

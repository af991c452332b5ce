#!/bin/sh
# Builds fuzz/checkpoint_fuzzer.cpp with clang's libFuzzer, AddressSanitizer and UndefinedBehaviorSanitizer against Debian's LibTorch, then
# runs it on the seed checkpoints in fuzz/corpus/checkpoint.
#   fuzz/run_checkpoint_fuzzer.sh [runs] [extra libFuzzer flags...]     (default: 1000000 inputs)
# Needs clang and its runtime (Debian 12: apt-get install -y --no-install-recommends clang libclang-rt-14-dev)
# and LibTorch's headers and libraries (Debian: libtorch-dev). Run it with `nice -n 19` on a shared machine.
set -eu
cd "$(dirname "$0")/.."
runs=${1:-1000000}
[ $# -gt 0 ] && shift
out=${VOLT_FUZZ_OUT:-build-fuzz}
# Another LibTorch: VOLT_TORCH_PREFIX=<its prefix> (headers in include/, libraries in lib/).
torch_flags="-isystem /usr/include/torch/csrc/api/include"
if [ -n "${VOLT_TORCH_PREFIX:-}" ]; then
  torch_flags="-isystem $VOLT_TORCH_PREFIX/include -isystem $VOLT_TORCH_PREFIX/include/torch/csrc/api/include \
    -L$VOLT_TORCH_PREFIX/lib -Wl,-rpath,$VOLT_TORCH_PREFIX/lib"
fi
mkdir -p "$out" "$out/corpus-checkpoint"
if [ ! -x "$out/checkpoint_fuzzer" ] || [ fuzz/checkpoint_fuzzer.cpp -nt "$out/checkpoint_fuzzer" ] ||
   [ -n "$(find include/volt/serialization include/volt/core -newer "$out/checkpoint_fuzzer" -print -quit)" ]; then
  clang++ -std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -D_GLIBCXX_USE_CXX11_ABI=1 -Wall -Wextra -Werror \
    -Iinclude $torch_flags fuzz/checkpoint_fuzzer.cpp -o "$out/checkpoint_fuzzer" \
    -ltorch -ltorch_cpu -lc10
fi
# LibTorch's allocations are not instrumented; leak checking would report its intentional process-lifetime caches.
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0} \
  "$out/checkpoint_fuzzer" -runs="$runs" -max_len=65536 -timeout=30 -rss_limit_mb=4096 -print_final_stats=1 "$@" \
  "$out/corpus-checkpoint" fuzz/corpus/checkpoint

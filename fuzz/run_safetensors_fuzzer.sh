#!/bin/sh
# Builds fuzz/safetensors_fuzzer.cpp (volt's safetensors reader) with clang's libFuzzer, AddressSanitizer and
# UndefinedBehaviorSanitizer, then runs it on the seeds in fuzz/corpus/safetensors (files written by Python's
# safetensors package) with the dictionary fuzz/safetensors.dict.
#   fuzz/run_safetensors_fuzzer.sh [runs] [extra libFuzzer flags...]     (default: 1000000 inputs)
# Needs clang >= 15 and its runtime (Debian 12: apt-get install -y --no-install-recommends clang-19
# libclang-rt-19-dev): LibTorch's headers, which volt/serialization/safetensors.hpp includes, do not compile in C++20 with
# clang 14. And a LibTorch: VOLT_TORCH_PREFIX=<prefix> (headers in include/, libraries in lib/), else the
# one of the Python that imports torch (/opt/volt-venv/bin/python, then python3).
# The binary goes to ${VOLT_FUZZ_OUT:-build-fuzz} and is rebuilt when a source or the flags change;
# VOLT_FUZZ_CXXFLAGS adds compiler flags. Run it with `nice -n 10` on a shared machine.
set -eu
cd "$(dirname "$0")/.."
runs=${1:-1000000}
[ $# -gt 0 ] && shift
out=${VOLT_FUZZ_OUT:-build-fuzz}

# VOLT_FUZZ_CXX=<compiler> picks the compiler (CTest passes the one CMake checked).
clangxx=
for candidate in ${VOLT_FUZZ_CXX:-} clang++-19 clang++-18 clang++-17 clang++-16 clang++-15 clang++; do
  command -v "$candidate" >/dev/null 2>&1 || continue
  major=$("$candidate" -dumpversion 2>/dev/null | cut -d. -f1)
  case $major in '' | *[!0-9]*) continue ;; esac
  if [ "$major" -ge 15 ]; then
    clangxx=$candidate
    break
  fi
done
if [ -z "$clangxx" ]; then
  echo "run_safetensors_fuzzer.sh: needs clang++ 15 or newer in PATH (clang 14 cannot compile LibTorch's headers in C++20);" \
    "Debian 12: apt-get install -y --no-install-recommends clang-19 libclang-rt-19-dev" >&2
  exit 1
fi

torch=${VOLT_TORCH_PREFIX:-}
if [ -z "$torch" ]; then
  for python in /opt/volt-venv/bin/python python3; do
    command -v "$python" >/dev/null 2>&1 || continue
    torch=$("$python" -c 'import os, torch; print(os.path.dirname(torch.__file__))' 2>/dev/null) && break
    torch=
  done
fi
if [ -z "$torch" ] || [ ! -d "$torch/include/torch/csrc/api/include" ]; then
  echo "run_safetensors_fuzzer.sh: no LibTorch found; set VOLT_TORCH_PREFIX to a LibTorch prefix (with include/ and lib/)" \
    "or install torch for /opt/volt-venv/bin/python or python3" >&2
  exit 1
fi

flags="-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
-D_GLIBCXX_USE_CXX11_ABI=1 -Wall -Wextra -Werror -Iinclude \
-isystem $torch/include -isystem $torch/include/torch/csrc/api/include ${VOLT_FUZZ_CXXFLAGS:-}"
mkdir -p "$out" "$out/corpus-safetensors"
binary=$out/safetensors_fuzzer
rebuild=no
if [ ! -x "$binary" ] || [ "$(cat "$binary.flags" 2>/dev/null)" != "$clangxx $flags" ]; then
  rebuild=yes
else
  for source in fuzz/safetensors_fuzzer.cpp $(find include/volt -name '*.hpp'); do
    if [ "$source" -nt "$binary" ]; then
      rebuild=yes
      break
    fi
  done
fi
if [ "$rebuild" = yes ]; then
  # shellcheck disable=SC2086
  "$clangxx" $flags fuzz/safetensors_fuzzer.cpp -o "$binary" \
    -L"$torch/lib" -Wl,-rpath,"$torch/lib" -ltorch -ltorch_cpu -lc10
  echo "$clangxx $flags" >"$binary.flags"
fi
# LibTorch's allocations are not instrumented; leak checking would report its intentional process-lifetime caches.
# New inputs go to $out/corpus-safetensors; the checked-in seeds are read only.
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0} \
  "$binary" -runs="$runs" -max_len=4096 -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
  -dict=fuzz/safetensors.dict "$@" "$out/corpus-safetensors" fuzz/corpus/safetensors

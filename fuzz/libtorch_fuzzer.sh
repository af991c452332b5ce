#!/bin/sh
# Builds and runs one of volt's libFuzzer targets that include LibTorch (clang >= 15, C++20, AddressSanitizer and
# UndefinedBehaviorSanitizer); fuzz/run_cli_fuzzer.sh and fuzz/run_safetensors_fuzzer.sh call it:
#   fuzz/libtorch_fuzzer.sh NAME DEFAULT_RUNS MAX_LEN [runs] [extra libFuzzer flags...]
# NAME: fuzz/NAME_fuzzer.cpp, seeds in fuzz/corpus/NAME, dictionary fuzz/NAME.dict.
# Needs clang >= 15 and its runtime (Debian 12: apt-get install -y --no-install-recommends clang-19
# libclang-rt-19-dev): LibTorch's headers do not compile in C++20 with clang 14. And a LibTorch:
# VOLT_TORCH_PREFIX=<prefix> (headers in include/, libraries in lib/), else the one of the Python that imports
# torch (/opt/volt-venv/bin/python, then python3).
# The binary goes to ${VOLT_FUZZ_OUT:-build-fuzz} and is rebuilt when a source or the flags change;
# VOLT_FUZZ_CXXFLAGS adds compiler flags; VOLT_FUZZ_TIMEOUT is the seconds one input may take (default 30).
# libFuzzer's full output goes to $VOLT_FUZZ_OUT/NAME.log; this prints its summary, and on a failure the report
# (sanitizer or property violation), the input that caused it in hex and where it was saved.
set -eu
cd "$(dirname "$0")/.."
name=$1
default_runs=$2
max_len=$3
shift 3
runs=${1:-$default_runs}
[ $# -gt 0 ] && shift
out=${VOLT_FUZZ_OUT:-build-fuzz}
script="run_${name}_fuzzer.sh"

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
  echo "$script: needs clang++ 15 or newer in PATH (clang 14 cannot compile LibTorch's headers in C++20);" \
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
  echo "$script: no LibTorch found; set VOLT_TORCH_PREFIX to a LibTorch prefix (with include/ and lib/)" \
    "or install torch for /opt/volt-venv/bin/python or python3" >&2
  exit 1
fi

flags="-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
-D_GLIBCXX_USE_CXX11_ABI=1 -Wall -Wextra -Werror -Iinclude \
-isystem $torch/include -isystem $torch/include/torch/csrc/api/include ${VOLT_FUZZ_CXXFLAGS:-}"
corpus=$out/corpus-$name
mkdir -p "$out" "$corpus" "$out/artifacts-$name"
binary=$out/${name}_fuzzer
rebuild=no
if [ ! -x "$binary" ] || [ "$(cat "$binary.flags" 2>/dev/null)" != "$clangxx $flags" ]; then
  rebuild=yes
else
  for source in "fuzz/${name}_fuzzer.cpp" $(find include/volt -name '*.hpp' -o -name '*.ipp'); do
    if [ "$source" -nt "$binary" ]; then
      rebuild=yes
      break
    fi
  done
fi
if [ "$rebuild" = yes ]; then
  # shellcheck disable=SC2086
  "$clangxx" $flags "fuzz/${name}_fuzzer.cpp" -o "$binary" \
    -L"$torch/lib" -Wl,-rpath,"$torch/lib" -ltorch -ltorch_cpu -lc10
  echo "$clangxx $flags" >"$binary.flags"
fi

# LibTorch's allocations are not instrumented; leak checking would report its intentional process-lifetime caches.
# New inputs go to $corpus; the checked-in seeds are read only. A failing input is saved under artifacts-NAME/.
log=$out/$name.log
status=0
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0} \
  "$binary" -runs="$runs" -max_len="$max_len" -timeout="${VOLT_FUZZ_TIMEOUT:-30}" -rss_limit_mb=4096 \
  -print_final_stats=1 -artifact_prefix="$out/artifacts-$name/" -dict="fuzz/$name.dict" "$@" \
  "$corpus" "fuzz/corpus/$name" >"$log" 2>&1 || status=$?
# The summary: the seed line, the last progress lines and the final statistics.
grep -E '^INFO: Seed|INITED' "$log" || true
grep -E '^#[0-9]+' "$log" | tail -n 3 || true
grep -E '^(Done |stat::)' "$log" || true
if [ "$status" -ne 0 ]; then
  echo "$script: the fuzzer exited with status $status; its report (full output: $log):"
  grep -n -m 1 -E '^==[0-9]+==|property violated|deadly signal|ALARM|Timeout|out-of-memory|runtime error' "$log" |
    cut -d: -f1 | while read -r first; do
      sed -n "$((first > 5 ? first - 5 : 1)),$((first + 60))p" "$log"
    done
  for artifact in "$out/artifacts-$name"/*; do
    [ -f "$artifact" ] || continue
    echo "input saved as $artifact:"
    od -An -tx1 -v "$artifact" | head -n 20
  done
fi
exit "$status"

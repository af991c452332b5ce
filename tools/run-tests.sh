#!/usr/bin/env bash
# Builds volt's tests and examples and runs every test, in two build trees that together cover what users run:
#   sanitize  Debian's LibTorch 1.13, include/, AddressSanitizer + UndefinedBehaviorSanitizer (VOLT_SANITIZE=ON,
#             -O0: much less compile time than -O1 under the sanitizers, docs/ci.md): every test; the compile-fail
#             snippets, the header self-sufficiency check and the four ways of consuming volt run here only. The
#             examples are built and run in the cuda tree (here too when only this tree is built).
#   cuda      PyPI's LibTorch 2.11 (a CUDA build, from the virtual environment tools/install-python.sh makes)
#             with the CUDA toolkit, single_include/, -O0 (examples/fashion_mnist/main.cpp: 68 CPU s, 91 at -O1,
#             ~150 at -O3; tools/gpu-check.sh builds everything at -O3 on the GPU machine). g++ 12 raises false
#             -Wmaybe-uninitialized in LibTorch's DataLoader and -Warray-bounds/-Wstringop-overflow in
#             libstdc++'s string copy when optimizing, so those (and -Wrestrict, off for the examples at -O3 too)
#             stay off here for a build at -O1 or more (the sanitize tree turns off the first for its own reason):
#             VOLT_WITH_CUDA is defined, so every CUDA-only code
#             path compiles and links; GPU tests skip with a message (no GPU here). Tests that compare against
#             Python (VOLT_PYTHON) run here, against the same torch version, and so do the examples.
# Installs missing Debian packages and the Python environment first. Prints every phase's duration at the end.
#   tools/run-tests.sh                     both trees (what CI runs)
#   TREES=sanitize tools/run-tests.sh      one tree only (TREES=cuda: the other)
# Environment: TREES (default "sanitize cuda"), BUILD_ROOT (default build/tests), JOBS (default nproc),
# VOLT_VENV (default /opt/volt-venv), SKIP_INSTALL=1 (use what is installed, install nothing),
# REQUIRE_CUDA (default 1 when nvcc is found: the cuda tree fails unless VOLT_WITH_CUDA is defined).
set -euo pipefail
cd "$(dirname "$0")/.."

trees=${TREES:-sanitize cuda}
build_root=${BUILD_ROOT:-build/tests}
jobs=${JOBS:-$(nproc)}
venv=${VOLT_VENV:-/opt/volt-venv}
export PATH="$PATH:/usr/local/cuda/bin"
status=0
phases=()

# CPU seconds (user + system) used so far by this script's finished child processes and their descendants, in
# $cpu. (`times` runs in this shell: in a $(...) subshell it would count the subshell's children only.)
times_file=$(mktemp)
cpu_seconds() {
  times > "$times_file"
  cpu=$(tail -1 "$times_file" | awk '{ t = 0; for (i = 1; i <= 2; i++) { split($i, p, "m"); t += p[1] * 60 + p[2] }
                                      printf "%d", t }')
}

# phase <name> <command...>: runs the command, records its wall time, CPU time and result (a failure fails the run
# at the end). The CPU time does not depend on what else runs on the machine: on an idle machine with N cores a
# phase that keeps them busy takes about cpu/N seconds.
phase() {
  local name=$1
  shift
  echo "== $name"
  local start cpu_start result
  start=$(date +%s)
  cpu_seconds
  cpu_start=$cpu
  if "$@"; then result=ok; else result=FAILED; status=1; fi
  cpu_seconds
  phases+=("$(printf '%-56s %6d s wall %6d s cpu  %s' "$name" $(( $(date +%s) - start )) $(( cpu - cpu_start )) \
                     "$result")")
}

summary() {
  rm -f "$times_file"
  echo "== phase durations (wall: elapsed here; cpu: user+system seconds of all its processes)"
  printf '%s\n' "${phases[@]}"
  [ $status -eq 0 ] && echo "== all phases passed" || echo "== SOME PHASES FAILED"
}
trap summary EXIT

wants() { [[ " $trees " == *" $1 "* ]]; }

if [ "${SKIP_INSTALL:-0}" != 1 ]; then
  phase "install Debian packages" tools/install-deps.sh --tests
  if wants cuda; then
    phase "install Python (torch, lightning)" tools/install-python.sh
  fi
fi
phase "single header in sync with include/" python3 tools/amalgamate.py --check
phase "API reference (Doxygen; a warning fails)" tools/build-docs.sh "$build_root/docs"

# Builds keep going after a failure (ninja -k 0) and the tests still run, so one broken area does not hide the
# results of the others; the run fails at the end.

# Labels run once, in the sanitize tree (or in the cuda tree when it is the only one asked for): what only compiles
# (compile-fail snippets, every header on its own: label "once") or does not depend on the tree (consumption).
once_labels="consumption|compile_fail|once"

# ctest with the skip messages of passing tests shown (ctest prints the output of failing tests only).
run_ctest() {
  local dir=$1
  shift
  local result=0
  (cd "$dir" && ctest --output-on-failure -j "$jobs" "$@") || result=1
  local skips
  skips=$(grep -h 'MESSAGE: skipped' "$dir/Testing/Temporary/LastTest.log" 2>/dev/null | sed 's/.*MESSAGE: //' |
          sort | uniq -c || true)
  if [ -n "$skips" ]; then
    echo "-- skip messages printed by passing tests (count, message):"
    echo "$skips"
  fi
  return $result
}

# Lists the CUDA-only sources and headers compiled with VOLT_WITH_CUDA in a build tree (from compile_commands.json).
show_cuda_sources() {
  python3 - "$1" "${REQUIRE_CUDA:-}" <<'EOF'
import json, os, re, sys
build, require = sys.argv[1], sys.argv[2]
root = os.getcwd()
commands = json.load(open(os.path.join(build, "compile_commands.json")))
compiled, with_cuda, missing = [], [], []
for entry in commands:
    path = os.path.relpath(entry["file"], root)
    if not path.startswith(("tests/", "examples/", "benchmarks/")):
        continue
    match = re.search(r" -o (\S+)", entry["command"])
    if match and not os.path.exists(os.path.join(entry["directory"], match.group(1))):
        if not path.endswith("pch_anchor.cpp"):  # flag probes, never built
            missing.append(path)  # the build failed for it
        continue
    compiled.append(path)
    if "-DVOLT_WITH_CUDA=1" in entry["command"]:
        with_cuda.append(path)
def cuda_only(path):
    text = open(path, errors="replace").read()
    return "cuda" in os.path.basename(path).lower() or "VOLT_WITH_CUDA" in text
cuda_sources = sorted(p for p in compiled if cuda_only(p))
without = sorted(p for p in cuda_sources if p not in with_cuda)
headers = sorted(os.path.relpath(os.path.join(d, f), root)
                 for d, _, files in os.walk("include/volt") for f in files
                 if f.endswith(".hpp") and "VOLT_WITH_CUDA" in open(os.path.join(d, f)).read())
print(f"-- VOLT_WITH_CUDA=1 in {len(with_cuda)} of {len(compiled)} compiled test/example sources")
print("-- CUDA test sources compiled with VOLT_WITH_CUDA=1: " + (", ".join(p for p in cuda_sources if p in with_cuda) or "none"))
print("-- headers with VOLT_WITH_CUDA code paths, compiled in each of those: " + (", ".join(headers) or "none"))
failed = False
if missing:
    print("-- error: not compiled (build errors above): " + ", ".join(sorted(missing)))
    failed = True
if require == "1" and (not with_cuda or without):
    print("-- error: REQUIRE_CUDA=1 but VOLT_WITH_CUDA is not defined for: " + (", ".join(without) or "any source")
          + " (LibTorch without CUDA, or no CUDA toolkit found)")
    failed = True
sys.exit(1 if failed else 0)
EOF
}

if wants sanitize; then
  dir="$build_root/sanitize"
  # The examples (each instantiates many Trainers: minutes of compiling under ASan) are built and run in the cuda
  # tree when it is built. The sanitized tests compile at -O0: under ASan + UBSan the heaviest source takes a third
  # of -O1's CPU time (tests/trainer/trainer_test.cpp: 43 s vs 133 s), the sanitizers check every access at any
  # level, and the warnings that need the optimizer come from tools/gpu-check.sh (-O3).
  examples_in_sanitize=ON
  wants cuda && examples_in_sanitize=OFF
  # This tree links volt::compiled (VOLT_SEPARATE_COMPILATION: volt's model-independent code compiled once, in
  # src/volt.cpp); the cuda tree tests the header-only form (docs/architecture.md).
  phase "sanitize: configure (LibTorch 1.13, include/, volt::compiled)" \
    cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DVOLT_TEST_SINGLE_HEADER=OFF -DVOLT_SANITIZE=ON \
          -DVOLT_TEST_SEPARATE_COMPILATION=ON \
          -DCMAKE_CXX_FLAGS_RELEASE="-O0 -DNDEBUG" -DVOLT_BUILD_EXAMPLES=$examples_in_sanitize \
          -DCMAKE_EXPORT_COMPILE_COMMANDS=ON
  phase "sanitize: build (ASan+UBSan)" cmake --build "$dir" -j "$jobs" -- -k 0
  # ASAN_OPTIONS/UBSAN_OPTIONS come from the build tree (cmake/sanitizers.cmake) unless set by the caller.
  phase "sanitize: test (all labels)" run_ctest "$dir"
fi

if wants cuda; then
  dir="$build_root/cuda"
  # Both the wheel's CMake folder and the wheel's torch/ folder: TorchConfig.cmake looks for libtorch.so and
  # libc10.so with find_library(... PATHS <torch>/lib), which searches the system folders first and so picks
  # Debian's LibTorch 1.13 when libtorch-dev is installed; a prefix path is searched before them.
  prefix=$("$venv/bin/python" -c 'import os, torch; print(torch.utils.cmake_prefix_path + ";" + os.path.dirname(torch.__file__))')
  if [ -z "${REQUIRE_CUDA:-}" ] && command -v nvcc >/dev/null; then
    REQUIRE_CUDA=1
  fi
  # The wheel's CUDA and the toolkit's must share a major version (headers from the toolkit, libraries from the
  # wheel at run time: docs/ci.md).
  check_cuda_versions() {
    local wheel toolkit
    wheel=$("$venv/bin/python" -c 'import torch; print(torch.__version__, torch.version.cuda)')
    toolkit=$(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\),.*/\1/p')
    echo "-- torch ${wheel% *} is built with CUDA ${wheel#* }; CUDA toolkit: ${toolkit:-none}"
    [ -z "$toolkit" ] || [ "${wheel#* }" = None ] || [ "${toolkit%%.*}" = "$(echo "${wheel#* }" | cut -d. -f1)" ] || {
      echo "-- error: CUDA major versions differ: install the torch wheel built for CUDA $toolkit (docs/ci.md)"
      return 1
    }
  }
  phase "cuda: wheel CUDA and toolkit agree" check_cuda_versions
  exclude=()
  wants sanitize && exclude=(-LE "$once_labels")
  # The wheel's LibTorch finds the CUDA toolkit through Caffe2's cuda.cmake (nvcc on PATH or /usr/local/cuda);
  # no GPU here, so TORCH_CUDA_ARCH_LIST only keeps it from probing for one (volt compiles no CUDA kernels).
  # -O0: the tests check behaviour, and CI has 30 minutes on 2 cores (docs/ci.md); the optimized build is the GPU
  # machine's (tools/gpu-check.sh, -O3).
  phase "cuda: configure (LibTorch 2.11 + CUDA, single_include/)" \
    cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DVOLT_TEST_SINGLE_HEADER=ON \
          -DCMAKE_CXX_FLAGS_RELEASE="-O0 -DNDEBUG" -DCMAKE_CXX_FLAGS="-Wno-maybe-uninitialized -Wno-array-bounds -Wno-stringop-overflow -Wno-restrict" \
          -DCMAKE_PREFIX_PATH="$prefix" -DVOLT_PYTHON="$venv/bin/python" -DTORCH_CUDA_ARCH_LIST=9.0 \
          -DCMAKE_EXPORT_COMPILE_COMMANDS=ON
  phase "cuda: build" cmake --build "$dir" -j "$jobs" -- -k 0
  phase "cuda: CUDA code paths compiled" show_cuda_sources "$dir"
  phase "cuda: test" run_ctest "$dir" "${exclude[@]}"
fi
exit $status

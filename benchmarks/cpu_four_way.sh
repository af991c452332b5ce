#!/bin/sh
# CPU four-way benchmark: volt's Trainer vs a hand-written LibTorch loop (C++, benchmarks/cpp/cpu_four_way.cpp)
# vs a plain PyTorch loop vs Lightning's Trainer (Python, benchmarks/python/cpu_four_way.py), same data, same
# steps, one run on this machine. Writes benchmarks/results/cpu-four-way.md.
#
#   benchmarks/cpu_four_way.sh [PYTHON] [extra cmake arguments...]
#
# PYTHON needs torch and lightning (default /opt/volt-venv/bin/python). The C++ side is built in
# build-cpu-four-way with the LibTorch that CMake finds (pass e.g.
# -DCMAKE_PREFIX_PATH=$(PYTHON -c 'import torch;print(torch.utils.cmake_prefix_path)') for the wheel's).
# STEPS, WARMUP and ROUNDS (environment) override 300, 30 and 5.
set -eu
cd "$(dirname "$0")/.."
python=${1:-/opt/volt-venv/bin/python}
[ $# -gt 0 ] && shift
build=${BUILD_DIR:-build-cpu-four-way}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DVOLT_BUILD_BENCHMARKS=ON -DVOLT_BUILD_TESTS=OFF \
  -DVOLT_BUILD_EXAMPLES=OFF "$@" >/dev/null
cmake --build "$build" --target bench_cpu_four_way -j2
"$python" benchmarks/python/cpu_four_way.py --cpp-binary "$build/benchmarks/bench_cpu_four_way" \
  --steps "${STEPS:-300}" --warmup "${WARMUP:-30}" --rounds "${ROUNDS:-5}" \
  --output benchmarks/results/cpu-four-way.md \
  --command "STEPS=${STEPS:-300} WARMUP=${WARMUP:-30} ROUNDS=${ROUNDS:-5} benchmarks/cpu_four_way.sh $python $*"

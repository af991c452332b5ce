#!/bin/sh
# CPU four-way benchmark: volt's Trainer vs a hand-written LibTorch loop (C++, benchmarks/cpp/cpu_four_way.cpp)
# vs a plain PyTorch loop vs Lightning's Trainer (Python, benchmarks/python/cpu_four_way.py): same data, same
# steps, one thread, all in one run on this machine. Writes benchmarks/results/cpu-four-way.md.
#
#   benchmarks/cpu_four_way.sh [PYTHON]
#
# PYTHON needs torch and lightning (default /opt/volt-venv/bin/python). The C++ side is built in BUILD_DIR
# (default build-cpu-four-way-<LIBTORCH>) against LIBTORCH=python (default: the LibTorch inside PYTHON's torch
# wheel, so all four loops run the same kernels) or LIBTORCH=system (the LibTorch CMake finds, e.g. Debian's 1.13).
# STEPS, WARMUP and ROUNDS (environment) override 300, 30 and 5.
set -eu
cd "$(dirname "$0")/.."
python=${1:-/opt/volt-venv/bin/python}
libtorch=${LIBTORCH:-python}
build=${BUILD_DIR:-build-cpu-four-way-$libtorch}
steps=${STEPS:-300}
warmup=${WARMUP:-30}
rounds=${ROUNDS:-5}
if [ "$libtorch" = python ]; then
  prefix=$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)')
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DVOLT_BUILD_BENCHMARKS=ON -DVOLT_BUILD_TESTS=OFF \
    -DVOLT_BUILD_EXAMPLES=OFF "-DCMAKE_PREFIX_PATH=$prefix" >/dev/null
else
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DVOLT_BUILD_BENCHMARKS=ON -DVOLT_BUILD_TESTS=OFF \
    -DVOLT_BUILD_EXAMPLES=OFF >/dev/null
fi
cmake --build "$build" --target bench_cpu_four_way -j2
"$python" benchmarks/python/cpu_four_way.py --cpp-binary "$build/benchmarks/bench_cpu_four_way" \
  --steps "$steps" --warmup "$warmup" --rounds "$rounds" --output benchmarks/results/cpu-four-way.md \
  --command "LIBTORCH=$libtorch STEPS=$steps WARMUP=$warmup ROUNDS=$rounds benchmarks/cpu_four_way.sh $python"

#!/usr/bin/env bash
# The whole GPU run: builds volt's tests, examples and benchmarks against the LibTorch of python3's torch
# (a CUDA build), runs every test (the CUDA cases run instead of skipping; with 2 GPUs the NCCL DDP tests too),
# trains Fashion-MNIST (MLP and CNN) on the GPU at each precision, and measures Trainer throughput, the optimizer
# step, the per-step profile and (with 2 GPUs) DDP scaling against PyTorch's DistributedDataParallel. Prepare .gpu/
# first with tools/gpu-prepare.sh. The four-way table is its own command: benchmarks/four_way.sh cuda python3.
#   tools/gpu-check.sh [RESULTS_DIR]     (default: build/gpu-results)
# SKIP="tests examples bench ddp" leaves out any of those parts (a later call reuses build/gpu); TESTS="volt_test_a
# volt_test_b" runs only those test binaries (and not the other ctest tests).
# Writes summary.md and one log per part to RESULTS_DIR. BENCH_STEPS, BENCH_WIDE_STEPS, BENCH_REPEATS, MATH_MODES_ROUNDS and
# DDP_REPEATS size the benchmarks.
set -uo pipefail
cd "$(dirname "$0")/.."
results=${1:-build/gpu-results}
mkdir -p "$results"
results=$(cd "$results" && pwd)
jobs=$(nproc)
skip=" ${SKIP:-} "
export NCCL_NVLS_ENABLE=0
summary="$results/summary.md"
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }

note "# volt GPU run"
note ""
note "- machine: $(nvidia-smi -L 2>/dev/null | head -1)"
note "- torch: $(python3 -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)')"
note "- nvcc: $(nvcc --version 2>/dev/null | tail -1)"

prefix="$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)');$PWD/.gpu/doctest"
start=$(date +%s)
torch_dir="$(python3 -c 'import torch, os; print(os.path.dirname(torch.__file__))')"
if ! cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DVOLT_BUILD_BENCHMARKS=ON \
     -DCMAKE_PREFIX_PATH="$prefix;$torch_dir" -DVOLT_GLOO_INCLUDE_DIR="$PWD/.gpu/gloo/include" \
     -DVOLT_PYTHON="$(command -v python3)" > "$results/build.log" 2>&1; then
  note "- configure FAILED (see build.log)"; tail -30 "$results/build.log"; exit 1
fi
# -k 0: one run shows every target that fails; the parts below run what did build.
if ! cmake --build build/gpu -j "$jobs" -- -k 0 >> "$results/build.log" 2>&1; then
  note "- build FAILED (see build.log): $(grep -c '^FAILED' "$results/build.log") targets"
  grep -E "^FAILED|error:" "$results/build.log" | cut -c1-300 | head -30 | tee -a "$summary"
fi
note "- build: $(( $(date +%s) - start )) s with $jobs jobs"

# Fashion-MNIST, unpacked from the carried archives (the examples read VOLT_FASHION_MNIST_DIR).
data=$PWD/build/gpu/fashion-mnist
mkdir -p "$data"
for f in .gpu/fashion-mnist/*.gz; do gzip -dc "$f" > "$data/$(basename "$f" .gz)"; done
export VOLT_FASHION_MNIST_DIR=$data

if [[ "$skip" != *" tests "* ]]; then
# The doctest suites, one binary per area, with their own summaries (the CUDA cases run here).
: > "$results/tests.log"
for binary in build/gpu/tests/volt_test_*; do
  name=$(basename "$binary")
  if [ -n "${TESTS:-}" ] && [[ " $TESTS " != *" $name "* ]]; then continue; fi
  echo "==== $name" >> "$results/tests.log"
  "$binary" >> "$results/tests.log" 2>&1
  note "- $name: exit $? | $(grep -E '^\[doctest\] test cases' "$results/tests.log" | tail -1 | tr -s ' ')"
done
# Every other ctest test (compile-fail, header check, single-header sync, example smoke run), except the
# four ways of consuming volt (they rebuild volt from scratch) and the full example run (done below).
if [ -z "${TESTS:-}" ]; then
(cd build/gpu && ctest -j "$jobs" -LE "consumption|example_full|ddp|oracle|fuzz" -E '^volt\.[a-z]+$' --output-on-failure \
   > "$results/ctest.log" 2>&1)
note "- other ctest tests: $(grep -E 'tests passed|tests failed' "$results/ctest.log" | tail -1)"
grep -E "Failed|\*\*\*" "$results/ctest.log" | head -20 | tee -a "$summary"
# Multi-process DDP: Gloo on the CPU and, with 2 GPUs, NCCL (one at a time: they bind ports and GPUs).
(cd build/gpu && ctest -L ddp -V > "$results/ddp.log" 2>&1)
note "- DDP tests: $(grep -E 'tests passed|tests failed' "$results/ddp.log" | tail -1)"
grep -E "max \|difference\||Failed|Not Run|Skipped" "$results/ddp.log" | head -20 | tee -a "$summary"
# doctor's view of this machine
build/gpu/examples/doctor > "$results/doctor.log" 2>&1
note "- doctor: exit $?"
fi
fi

# Fashion-MNIST on the GPU, each precision.
if [[ "$skip" != *" examples "* ]]; then
note ""
note "## Fashion-MNIST on CUDA (5 epochs, batch 128): MLP (Adam 1e-3, StepLR 3/0.5) and SimpleCNN"
note ""
: > "$results/fashion_mnist.log"
for example in fashion_mnist fashion_mnist_cnn; do
  for precision in 32-true bf16-mixed 16-mixed; do
    begin=$(date +%s.%N)
    build/gpu/examples/$example --accelerator cuda --precision "$precision" --data-dir "$data" --no-progress-bar \
      --max-epochs 5 --default-root-dir "build/gpu/runs/$example-$precision" > build/gpu/fm.log 2>&1
    status=$?
    seconds=$(awk "BEGIN {printf \"%.1f\", $(date +%s.%N) - $begin}")
    cat build/gpu/fm.log >> "$results/fashion_mnist.log"
    note "- $example $precision: exit $status, ${seconds} s | $(grep -E '^device:' build/gpu/fm.log | head -1) | $(grep -iE 'test accuracy' build/gpu/fm.log | tail -1)"
  done
done
# The GAN (manual optimization, two optimizers): 10 epochs, its last sample grid copied to the results.
for precision in 32-true bf16-mixed; do
  begin=$(date +%s.%N)
  build/gpu/examples/fashion_mnist_gan --accelerator cuda --precision "$precision" --data-dir "$data" \
    --no-progress-bar --default-root-dir "build/gpu/runs/gan-$precision" > build/gpu/gan.log 2>&1
  status=$?
  seconds=$(awk "BEGIN {printf \"%.1f\", $(date +%s.%N) - $begin}")
  cat build/gpu/gan.log >> "$results/fashion_mnist.log"
  note "- fashion_mnist_gan $precision: exit $status, ${seconds} s | $(grep -E '^device:' build/gpu/gan.log | tail -1)"
  grid=$(find "build/gpu/runs/gan-$precision" -name '*.png' | sort | tail -1)
  [ -n "$grid" ] && cp "$grid" "$results/gan-$precision-last-grid.png"
done
fi

if [[ "$skip" != *" bench "* ]]; then
note ""
note "## Trainer throughput (bench_trainer_throughput)"
note ""
build/gpu/benchmarks/bench_trainer_throughput --steps ${BENCH_STEPS:-200} --wide-steps ${BENCH_WIDE_STEPS:-40} \
  --repeats ${BENCH_REPEATS:-5} > "$results/throughput.md" 2>&1
cat "$results/throughput.md" | tee -a "$summary"
note ""
note "## Optimizer step (bench_optimizer_step --device cuda)"
note ""
build/gpu/benchmarks/bench_optimizer_step --device cuda --steps 1000 --large-steps 200 --repeats 5 \
  > "$results/optimizer_step.md" 2>&1
cat "$results/optimizer_step.md" | tee -a "$summary"
note ""
note "## Per-step profile (bench_step_profile --device cuda)"
note ""
build/gpu/benchmarks/bench_step_profile --device cuda > "$results/step_profile.md" 2> "$results/step_profile.log"
cat "$results/step_profile.md" | tee -a "$summary"
note ""
note "## Memory format and float32 matmul precision (bench_math_modes)"
note ""
build/gpu/benchmarks/bench_math_modes --rounds ${MATH_MODES_ROUNDS:-3} > "$results/math_modes.md" 2> "$results/math_modes.log"
cat "$results/math_modes.md" | tee -a "$summary"
fi
if [[ "$skip" != *" ddp "* ]] && [ "$(nvidia-smi -L | grep -c '^GPU')" -ge 2 ]; then
note ""
note "## DDP scaling (benchmarks/ddp_scaling.sh): ResNet-18 CIFAR stem, BF16 autocast, 256 per GPU"
note ""
REPEATS=${DDP_REPEATS:-3} benchmarks/ddp_scaling.sh build/gpu "$results/ddp_scaling.md" 2> "$results/ddp_scaling.log"
cat "$results/ddp_scaling.md" | tee -a "$summary"
fi
note ""
note "total: $(( $(date +%s) - start )) s"

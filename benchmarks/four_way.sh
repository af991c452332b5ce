#!/bin/sh
# Four-way training benchmark, one command per device: volt's Trainer vs a hand-written LibTorch loop (C++,
# benchmarks/cpp/four_way.cpp) vs a plain PyTorch loop vs Lightning's Trainer (Python,
# benchmarks/python/four_way.py), plus on CUDA volt with cuda_graphs, the hand loop's step in one CUDA graph and a
# torch.compile(mode="reduce-overhead") loop; seed MLP, SimpleCNN and ResNet-18, FP32 (and BF16 autocast on CUDA).
# Opt-in models (MODELS=...): resnet18-cl (ResNet-18 in channels-last in every loop, FP32 and BF16), resnet18-fused
# (the same, with volt::nn's fused batch-norm modules in the C++ loops), gpt (a small GPT, BF16 and FP32 at
# "highest" and at "high") and gpt-fused (the same, with volt::nn::LayerNorm and volt::nn::Linear in the C++
# loops); resnet18-cl and gpt add a torch.compile default-mode row. Every table has a
# roofline column ("% of peak": FLOPs counted from the model against the matmul peak measured in the same run).
# Writes benchmarks/results/four-way-<device>.md (or OUTPUT).
#
#   benchmarks/four_way.sh [cpu|cuda] [PYTHON]
#
# PYTHON needs torch and lightning (default /opt/volt-venv/bin/python, else python3); the C++ side is built against
# the LibTorch inside PYTHON's torch, so every loop runs the same kernels. Environment:
#   BUILD_DIR       build folder (default build-four-way-<device>); logs go to BUILD_DIR/four-way-logs
#   OUTPUT          the Markdown file written (default benchmarks/results/four-way-<device>.md)
#   STEPS, WARMUP   timed and warm-up steps per run, for every model (default: per model and device)
#   ROUNDS          rounds per model and precision (default 5)
#   MODELS          subset of mlp,simplecnn,resnet18 (the default) and resnet18-cl,resnet18-fused,gpt,gpt-fused
#                   (opt-in)
#   LOOPS           subset of volt,libtorch,pytorch,lightning and on CUDA volt-graph,graph,compile,compile-default
#                   (default: all but compile-default for the default models, all for the opt-in ones)
#   PRECISIONS      subset of fp32,bf16,fp32-high (default: each model's own: fp32,bf16 on CUDA, fp32 on the CPU;
#                   gpt and gpt-fused bf16,fp32,fp32-high on CUDA, fp32,fp32-high on the CPU)
#   TIME_LIMIT      seconds for everything after configuring: rounds are cut to fit (default on CUDA: the models'
#                   budgets added up, at least 240: mlp 100, simplecnn 110, resnet18 170 (380 for the default
#                   run), resnet18-cl 170, resnet18-fused 150, gpt 330, gpt-fused 300)
#   COMPILE_BUDGET  seconds from the start within which torch.compile compiles may begin (default: the models'
#                   budgets added up, at least 60: mlp 30, simplecnn 40, resnet18 80 (150), resnet18-cl 100,
#                   resnet18-fused 60, gpt 130, gpt-fused 100)
#
# Expected run time on one H200 with the defaults (CUDA, batch 128 / 256, 5 rounds): configure ~20 s; the C++
# build (~1-2 min) overlaps worker start-up and torch.compile's compiles (~10-60 s per model and precision);
# one run of a row at the MLP or SimpleCNN (30 + 300 steps) ~0.1 s (graph), ~0.4 s (volt), ~0.7 s (hand loops,
# torch.compile) and ~1.5 s (Lightning, with its set-up), so ~5 s per round; ResNet-18 (10 + 40 steps at ~80-90
# steps/s) ~0.6 s per row, ~5 s per round; measuring ~3 min in all; ~5 min in all. TIME_LIMIT cuts rounds if it
# runs longer. The peak measurement (three 8192^3 matmuls, ~2 s) and the FLOP count (meta device, ~5 s) run
# before the compiles.
# The opt-in models, estimated (not yet measured) for MODELS=resnet18-cl,gpt (TIME_LIMIT 500 s): compiles
# ~20-30 s each, 4 for resnet18-cl and 6 for gpt, ~4 min in all, overlapping the build; resnet18-cl (10 + 40
# steps at ~130-260 steps/s, 8 rows) ~6 s per round, ~1 min for both precisions; gpt (batch 64, 5 + 20 steps at
# ~25-100 steps/s, 8 rows) ~6-12 s per round, ~2.5 min for its three precisions; ~7-8 min in all, configure
# included. All five models in one run need TIME_LIMIT ~880 s (over ten minutes): run the default and the
# opt-in models as two commands with two OUTPUT files.
set -eu
cd "$(dirname "$0")/.."
device=${1:-cpu}
case "$device" in
  cpu|cuda) ;;
  *) echo "usage: benchmarks/four_way.sh [cpu|cuda] [PYTHON]" >&2; exit 2 ;;
esac
if [ $# -ge 2 ]; then
  python=$2
elif [ -x /opt/volt-venv/bin/python ]; then
  python=/opt/volt-venv/bin/python
else
  python=python3
fi
build=${BUILD_DIR:-build-four-way-$device}
torch_dir=$("$python" -c 'import os, torch; print(os.path.dirname(torch.__file__))')

knobs=""
for name in BUILD_DIR OUTPUT STEPS WARMUP ROUNDS MODELS LOOPS PRECISIONS TIME_LIMIT COMPILE_BUDGET; do
  eval "value=\${$name:-}"
  if [ -n "$value" ]; then knobs="$knobs$name=$value "; fi
done

set -- -DCMAKE_BUILD_TYPE=Release -DVOLT_BUILD_BENCHMARKS=ON -DVOLT_BUILD_TESTS=OFF -DVOLT_BUILD_EXAMPLES=OFF \
  -DVOLT_INSTALL=OFF "-DCMAKE_PREFIX_PATH=$torch_dir/share/cmake;$torch_dir"
if [ "$device" = cuda ]; then set -- "$@" -DTORCH_CUDA_ARCH_LIST=9.0; fi
if [ ! -f "$build/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1; then
  set -- "$@" -G Ninja
fi
echo "configuring $build against $torch_dir"
mkdir -p "$build"
cmake -S . -B "$build" "$@" >"$build/four-way-configure.log" 2>&1 || {
  tail -20 "$build/four-way-configure.log" >&2
  echo "cmake configure failed (full log: $build/four-way-configure.log)" >&2
  exit 1
}

exec "$python" benchmarks/python/four_way.py --device "$device" --build-dir "$build" \
  --output "${OUTPUT:-benchmarks/results/four-way-$device.md}" \
  --command "${knobs}benchmarks/four_way.sh $device $python"

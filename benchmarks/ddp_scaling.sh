#!/usr/bin/env bash
# DDP scaling on a machine with 2 GPUs: volt (bench_ddp_scaling) and PyTorch's DistributedDataParallel
# (benchmarks/python/ddp_resnet.py under torchrun), 1 and 2 GPUs, ResNet-18 CIFAR stem, BF16 autocast, 256 per GPU.
# Runs are interleaved, REPEATS times each; the table shows medians.
#   benchmarks/ddp_scaling.sh BUILD_DIR [OUT.md]      (BUILD_DIR built with -DVOLT_BUILD_BENCHMARKS=ON)
set -uo pipefail
build=$1
out=${2:-/dev/stdout}
repeats=${REPEATS:-3}
steps=${STEPS:-100}
export NCCL_NVLS_ENABLE=0
here=$(cd "$(dirname "$0")" && pwd)
declare -A results
for ((r = 0; r < repeats; ++r)); do
  for devices in 1 2; do
    line=$("$build/benchmarks/bench_ddp_scaling" --devices $devices --steps "$steps" 2>&1 | grep '^volt devices=')
    echo "$line" >&2
    results[volt_$devices]+="$(sed 's/.*images_per_s=\([0-9.]*\).*/\1/' <<<"$line") "
    line=$(torchrun --standalone --nproc_per_node $devices "$here/python/ddp_resnet.py" --steps "$steps" 2>&1 |
           grep '^pytorch devices=')
    echo "$line" >&2
    results[torch_$devices]+="$(sed 's/.*images_per_s=\([0-9.]*\).*/\1/' <<<"$line") "
  done
done
median() { tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR ? a[int((NR+1)/2)] : 0)}'; }
v1=$(median "${results[volt_1]}"); v2=$(median "${results[volt_2]}")
t1=$(median "${results[torch_1]}"); t2=$(median "${results[torch_2]}")
{
  echo "| images/s (median of $repeats) | 1 GPU | 2 GPUs | scaling |"
  echo "|---|---|---|---|"
  echo "| volt Trainer<CUDA, SingleDevice/DDP, BF16Autocast> | $v1 | $v2 | $(awk "BEGIN {printf \"%.3f\", $v2 / $v1}") |"
  echo "| PyTorch DistributedDataParallel (torchrun) | $t1 | $t2 | $(awk "BEGIN {printf \"%.3f\", $t2 / $t1}") |"
  echo "| volt / PyTorch | $(awk "BEGIN {printf \"%.3f\", $v1 / $t1}") | $(awk "BEGIN {printf \"%.3f\", $v2 / $t2}") | |"
  echo ""
  echo "raw: volt 1 GPU: ${results[volt_1]}; volt 2 GPUs: ${results[volt_2]}; PyTorch 1 GPU: ${results[torch_1]}; PyTorch 2 GPUs: ${results[torch_2]}"
} > "$out"
cat "$out" >&2

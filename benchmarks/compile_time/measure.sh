#!/usr/bin/env bash
# Compile time of a user translation unit with `#include <volt/volt.hpp>` against the same unit with only
# `#include <torch/torch.h>` (target: at most 1.2x). Each variant is compiled RUNS times, alternating, and the
# medians are compared.
#   benchmarks/compile_time/measure.sh [RUNS]   (default 5)
# Environment: CXX (default g++), TORCH_INCLUDE (default Debian's /usr/include/torch/csrc/api/include),
# CXXFLAGS (default -O2).
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${1:-5}
cxx=${CXX:-g++}
torch_include=${TORCH_INCLUDE:-/usr/include/torch/csrc/api/include}
flags=(${CXXFLAGS:--O2} -std=c++20 -Iinclude -isystem "$torch_include" -c benchmarks/compile_time/user_program.cpp
       -o /dev/null)
time_one() {
  local start end
  start=$(date +%s.%N)
  "$cxx" "${flags[@]}" "$@"
  end=$(date +%s.%N)
  echo "$end - $start" | bc
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
torch_times=() volt_times=()
for ((i = 0; i < runs; ++i)); do
  torch_times+=("$(time_one)")
  volt_times+=("$(time_one -DWITH_VOLT)")
done
torch_median=$(printf '%s\n' "${torch_times[@]}" | median)
volt_median=$(printf '%s\n' "${volt_times[@]}" | median)
echo "compiler: $("$cxx" --version | head -1)"
echo "torch/torch.h only: ${torch_times[*]} s (median $torch_median s)"
echo "volt/volt.hpp:      ${volt_times[*]} s (median $volt_median s)"
echo "ratio volt / torch: $(echo "scale=3; $volt_median / $torch_median" | bc)"

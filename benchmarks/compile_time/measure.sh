#!/usr/bin/env bash
# Compile time and peak compiler memory of two pairs of translation units, each compiled with -c:
#   include  user_program.cpp with `#include <volt/volt.hpp>` (-DWITH_VOLT) against the same code with only
#            `#include <torch/torch.h>`: what including volt costs (target: at most 1.2x).
#   program  trainer_program.cpp, the README's complete Trainer program (it must equal the README's ```cpp block;
#            tools/check-docs.py checks the same), against hand_loop.cpp, the same work as the plain LibTorch loop
#            a user writes: what using the Trainer costs (target: at most 1.3x).
#   separate trainer_program.cpp compiled with -DVOLT_SEPARATE_COMPILATION (volt::compiled: volt's model-independent
#            functions compiled once, in src/volt.cpp, not in the program; volt/core/linkage.hpp) against hand_loop.cpp.
# All variants are compiled in turn, RUNS rounds (alternating, so that a slow spell of the machine hits every
# variant), and the medians and minima are compared. Wall time, CPU time (user + system: less disturbed than the
# wall time when other jobs share the cores) and "Maximum resident set size" come from GNU time (/usr/bin/time;
# Debian package `time`).
#   benchmarks/compile_time/measure.sh [RUNS]   (default 5)
# Environment: CXX (default g++), TORCH_INCLUDE (default Debian's /usr/include/torch/csrc/api/include),
# CXXFLAGS (default -O2), PAIRS (default "include program separate"; any of them alone to time fewer).
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${1:-5}
cxx=${CXX:-g++}
torch_include=${TORCH_INCLUDE:-/usr/include/torch/csrc/api/include}
pairs=${PAIRS:-include program separate}
dir=benchmarks/compile_time
flags=(${CXXFLAGS:--O2} -std=c++20 -Iinclude -isystem "$torch_include" -c -o /dev/null)
[[ -x /usr/bin/time ]] || { echo "measure.sh: /usr/bin/time missing (apt-get install -y time)" >&2; exit 1; }

# trainer_program.cpp must be the README's block (the first ```cpp block after "A complete program").
readme_block() { awk '/^A complete program:/{f=1} f&&/^```cpp/{g=1;next} g&&/^```/{exit} g{print}' README.md; }
if [[ " $pairs " == *" program "* || " $pairs " == *" separate "* ]] && ! diff -q <(readme_block) "$dir/trainer_program.cpp" >/dev/null; then
  echo "measure.sh: $dir/trainer_program.cpp differs from the README's complete program:" >&2
  diff <(readme_block) "$dir/trainer_program.cpp" >&2 || true
  exit 1
fi

# Variants: name, then the compiler arguments after the common flags.
variants=()
declare -A args
for pair in $pairs; do
  case $pair in
    include) variants+=(torch volt)
             args[torch]="$dir/user_program.cpp" args[volt]="-DWITH_VOLT $dir/user_program.cpp" ;;
    program) variants+=(hand_loop trainer)
             args[hand_loop]="$dir/hand_loop.cpp" args[trainer]="$dir/trainer_program.cpp" ;;
    separate) [[ " ${variants[*]} " == *" hand_loop "* ]] || variants+=(hand_loop)
              variants+=(separate)
              args[hand_loop]="$dir/hand_loop.cpp" args[separate]="-DVOLT_SEPARATE_COMPILATION $dir/trainer_program.cpp" ;;
    *) echo "measure.sh: unknown pair '$pair' (include, program, separate)" >&2; exit 1 ;;
  esac
done

report=$(mktemp)
trap 'rm -f "$report"' EXIT
declare -A times cpu memory
time_one() {  # appends the wall seconds to times[$1], the CPU seconds to cpu[$1], the KB to memory[$1]
  # shellcheck disable=SC2086
  /usr/bin/time -f "%e %U %S %M" -o "$report" "$cxx" "${flags[@]}" ${args[$1]}
  read -r seconds user system kilobytes < "$report"
  times[$1]+="$seconds " cpu[$1]+="$(echo "$user + $system" | bc) " memory[$1]+="$kilobytes "
}
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
minimum() { tr ' ' '\n' | grep . | sort -n | head -1; }
for ((i = 0; i < runs; ++i)); do
  for variant in "${variants[@]}"; do time_one "$variant"; done
done

echo "compiler: $("$cxx" --version | head -1); flags: ${CXXFLAGS:--O2} -std=c++20 -c; $runs runs each, alternating"
declare -A med low cmed clow mem
for variant in "${variants[@]}"; do
  med[$variant]=$(median <<< "${times[$variant]}")
  low[$variant]=$(minimum <<< "${times[$variant]}")
  cmed[$variant]=$(median <<< "${cpu[$variant]}")
  clow[$variant]=$(minimum <<< "${cpu[$variant]}")
  mem[$variant]=$(median <<< "${memory[$variant]}")
  printf '%-10s wall %s s (min %s, median %s); CPU %s s (min %s, median %s); peak RSS median %s MB\n' \
         "$variant:" "${times[$variant]% }" "${low[$variant]}" "${med[$variant]}" "${cpu[$variant]% }" \
         "${clow[$variant]}" "${cmed[$variant]}" "$((mem[$variant] / 1024))"
done
ratio() {  # ratio NUMERATOR DENOMINATOR LABEL
  local r='scale=3; '
  printf '%s: wall median %s, min %s; CPU median %s, min %s; peak RSS %s\n' "$3" \
         "$(echo "$r${med[$1]} / ${med[$2]}" | bc)" "$(echo "$r${low[$1]} / ${low[$2]}" | bc)" \
         "$(echo "$r${cmed[$1]} / ${cmed[$2]}" | bc)" "$(echo "$r${clow[$1]} / ${clow[$2]}" | bc)" \
         "$(echo "$r${mem[$1]} / ${mem[$2]}" | bc)"
}
for pair in $pairs; do
  case $pair in
    include) ratio volt torch "ratio volt.hpp / torch.h (include)" ;;
    program) ratio trainer hand_loop "ratio trainer_program / hand_loop (program)" ;;
    separate) ratio separate hand_loop "ratio trainer_program with VOLT_SEPARATE_COMPILATION / hand_loop (separate)" ;;
  esac
done

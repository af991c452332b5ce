#!/bin/sh
# The Fashion-MNIST example's run control, checked on a short CPU run:
#   --seed reproduces a run (two runs with seed 7 print the same test accuracy, seed 8 another one);
#   Ctrl+C (SIGINT) stops the fit, skips the test set and exits with status 130.
#   examples/check_seed_and_interrupt.sh <fashion_mnist binary> <scratch folder>
set -u
program=$1
scratch=$2
mkdir -p "$scratch"
run() { # seed
  "$program" --accelerator cpu --seed "$1" --max-steps 20 --limit-val-batches 2 --no-progress-bar \
    --default-root-dir "$scratch/seed-$1-$$-$(date +%s%N)" 2>/dev/null | grep "test accuracy"
}
a=$(run 7); b=$(run 7); c=$(run 8)
echo "seed 7: $a; seed 7 again: $b; seed 8: $c"
[ -n "$a" ] && [ "$a" = "$b" ] || { echo "FAILED: --seed 7 did not reproduce the run"; exit 1; }
[ "$a" != "$c" ] || { echo "FAILED: --seed 8 gave the same run as --seed 7"; exit 1; }
out="$scratch/interrupt-$$.txt"
"$program" --accelerator cpu --max-epochs 50 --no-progress-bar --default-root-dir "$scratch/interrupt-$$" > "$out" 2>&1 &
pid=$!
# Wait until training has started (the first epoch's line or the GPU line), then press Ctrl+C.
for _ in $(seq 1 120); do
  grep -q "GPU available" "$out" && break
  sleep 0.5
done
sleep 2
kill -INT "$pid"
wait "$pid"
status=$?
cat "$out"
[ "$status" = 130 ] || { echo "FAILED: exit status $status after SIGINT, expected 130"; exit 1; }
grep -q "test accuracy" "$out" && { echo "FAILED: the test set ran after SIGINT"; exit 1; }
grep -q "interrupted: interrupted by SIGINT; the test set was not run" "$out" || { echo "FAILED: no interruption notice"; exit 1; }
echo "seed and interrupt: ok"

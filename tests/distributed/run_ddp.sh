#!/usr/bin/env bash
# Multi-process DDP checks on the CPU (Gloo over loopback), one scenario per call:
#   run_ddp.sh WORKER SCENARIO
# Scenarios: launcher-{plain,accumulate,clip,manual,ema,datamodule}, cuda-{plain,accumulate,clip} (NCCL, 2 GPUs), torchrun-{plain,accumulate,clip}, launcher-kill, launcher-throw,
# launcher-exit, torchrun-kill, torchrun-throw, missing-rank, missing-host, predict-first, fabric-save-fail, trainer-save,
# torchrun-buffers. Exits 0 when the scenario behaved as required.
set -uo pipefail
worker=$1
scenario=$2
out=$(mktemp)
trap 'rm -f "$out" "$out".*' EXIT
fail() { echo "FAILED: $*"; echo "---- output"; cat "$out" "$out".* 2>/dev/null; exit 1; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
clean_env() { env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u NODE_RANK -u GROUP_RANK -u MASTER_ADDR -u MASTER_PORT \
                  -u TORCHELASTIC_RUN_ID -u SLURM_NTASKS "$@"; }

# Two processes with torchrun's variables; waits for both. Sets rc0 rc1 and the elapsed seconds. The port is
# picked here and bound later by rank 0's store, so another process can take it in between (seen once as
# EADDRINUSE on a busy host): then the pair is started again on another port, up to 3 times.
torchrun_pair() {
  local attempt port start
  for attempt in 1 2 3; do
    port=$(free_port)
    start=$SECONDS
    for rank in 0 1; do
      clean_env TORCHELASTIC_RUN_ID=volt-test RANK=$rank WORLD_SIZE=2 LOCAL_RANK=$rank GROUP_RANK=0 \
        MASTER_ADDR=127.0.0.1 MASTER_PORT=$port VOLT_DDP_TIMEOUT_S=${TIMEOUT_S:-60} \
        timeout 240 "$worker" "$@" > "$out.$rank" 2>&1 &
      eval "pid$rank=$!"
    done
    wait "$pid0"; rc0=$?
    wait "$pid1"; rc1=$?
    elapsed=$(( SECONDS - start ))
    cat "$out.0" "$out.1" > "$out"
    grep -q "EADDRINUSE" "$out.0" || return 0
    echo "port $port was taken before rank 0 could bind it (attempt $attempt); starting the pair again"
  done
}

if [[ $scenario == cuda-* ]] && [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" -lt 2 ]; then
  echo "SKIPPED: $scenario needs 2 CUDA GPUs"; exit 77
fi
case "$scenario" in
  launcher-plain|launcher-accumulate|launcher-clip|launcher-manual|launcher-ema|cuda-plain|cuda-accumulate|cuda-clip)
    variant=${scenario#*-}
    backend=gloo; extra=()
    if [[ $scenario == cuda-* ]]; then backend=nccl; extra=(cuda); fi
    clean_env timeout 240 "$worker" equivalence "$variant" "${extra[@]}" > "$out" 2>&1 || fail "exit status $?"
    grep -q "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/2" "$out" || fail "no rank-0 init line"
    grep -q "Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/2" "$out" || fail "no rank-1 init line"
    grep -q "distributed_backend=$backend" "$out" || fail "no banner"
    grep -q "All distributed processes registered. Starting with 2 processes" "$out" || fail "no banner"
    grep -q "rank 1 of 2" "$out" || fail "rank 1 did not finish"
    grep "max |difference|" "$out"
    ;;
  launcher-fabric)
    clean_env timeout 240 "$worker" fabric > "$out" 2>&1 || fail "exit status $?"
    grep -q "rank 1 of 2: fabric collectives ok" "$out" || fail "rank 1's collectives"
    grep -q "rank 0 of 2: fabric collectives ok" "$out" || fail "rank 0's collectives"
    grep "max |difference|" "$out"
    ;;
  launcher-datamodule)
    dir=$(mktemp -d)
    clean_env timeout 240 "$worker" datamodule "$dir" > "$out" 2>&1 || { rm -rf "$dir"; fail "exit status $?"; }
    rm -rf "$dir"
    grep -q "datamodule calls: prepare_data rank 0, setup rank 0, setup rank 1" "$out" || fail "wrong data module calls"
    grep -E "datamodule calls|max \|difference\|" "$out"
    ;;
  predict-first)
    clean_env timeout 240 "$worker" predict-first > "$out" 2>&1 || fail "exit status $?"
    sums=$(sed -n 's/^rank [01] of 2: 4 predictions, checksum //p' "$out" | sort -u)
    [ "$(grep -c 'predictions, checksum' "$out")" = 2 ] || fail "not both ranks predicted"
    [ "$(echo "$sums" | wc -l)" = 1 ] || fail "the ranks predicted with different weights: $sums"
    grep "checksum" "$out"
    ;;
  fabric-save-fail)
    blocker=$(mktemp)  # a regular file: the checkpoint's folder cannot be made under it
    start=$SECONDS
    torchrun_pair fabric-save-fail "$blocker"
    rm -f "$blocker"
    [ "$rc0" = 0 ] || fail "rank 0 exited with $rc0"
    [ "$rc1" = 0 ] || fail "rank 1 exited with $rc1 (124: left waiting)"
    grep -q "rank 1 caught CheckpointError: volt: rank 0 could not write the checkpoint $blocker/model.ckpt" "$out.1" ||
      fail "rank 1's error does not carry rank 0's failure"
    [ "$elapsed" -lt 30 ] || fail "took ${elapsed}s"
    grep caught "$out"
    ;;
  trainer-save)
    dir=$(mktemp -d); blocker=$(mktemp)
    start=$SECONDS
    torchrun_pair trainer-save "$dir" "$blocker"
    rm -rf "$dir" "$blocker"
    [ "$rc0" = 0 ] && [ "$rc1" = 0 ] || fail "exit statuses $rc0 $rc1"
    grep -q "rank 1 sees the checkpoint" "$out.1" || fail "rank 1 returned before the checkpoint was complete"
    grep -q "rank 1 caught CheckpointError: volt: rank 0 could not write the checkpoint $blocker/model.ckpt" "$out.1" ||
      fail "rank 1 did not learn of rank 0's failed write"
    [ "$elapsed" -lt 60 ] || fail "took ${elapsed}s"
    grep -E "sees|caught" "$out"
    ;;
  torchrun-buffers)
    torchrun_pair buffers
    [ "$rc0" = 0 ] && [ "$rc1" = 0 ] || fail "exit statuses $rc0 $rc1"
    [ "$(grep -c ' start: ' "$out.0")" = 12 ] || fail "rank 0 did not report 12 steps"
    # Each step begins with rank 0's BatchNorm statistics on both ranks (broadcast before the forward) ...
    diff <(grep ' start: ' "$out.0") <(grep ' start: ' "$out.1") > /dev/null || fail "the ranks began a step with other statistics"
    # ... although each rank's forward on its own data moves them apart.
    ! diff <(grep ' after forward: ' "$out.0") <(grep ' after forward: ' "$out.1") > /dev/null ||
      fail "the ranks' statistics did not differ after their forwards (the data was the same?)"
    grep -E "step (0|11) " "$out.1"
    ;;
  torchrun-plain|torchrun-accumulate|torchrun-clip)
    torchrun_pair equivalence "${scenario#torchrun-}"
    [ "$rc0" = 0 ] && [ "$rc1" = 0 ] || fail "exit statuses $rc0 $rc1"
    grep -q "rank 1 of 2" "$out" || fail "rank 1 did not finish"
    grep "max |difference|" "$out"
    ;;
  launcher-kill|launcher-throw|launcher-exit)
    how=${scenario#launcher-}
    start=$SECONDS
    clean_env VOLT_DDP_TIMEOUT_S=60 timeout 240 "$worker" fail "$how" 1 3 > "$out" 2>&1
    rc=$?; elapsed=$(( SECONDS - start ))
    [ "$rc" != 0 ] || fail "the run exited 0 although rank 1 failed"
    [ "$rc" != 124 ] || fail "the run hung until the test's timeout"
    grep -Eq "rank 1" "$out" || fail "no message names rank 1"
    [ "$how" != kill ] || grep -q "killed by signal 9" "$out" || fail "the message does not say rank 1 was killed"
    [ "$how" != throw ] || grep -q "deliberate failure in rank 1" "$out" || fail "rank 1's error is not shown"
    echo "ended with status $rc after ${elapsed}s:"; grep -E "rank 1" "$out" | head -5
    ;;
  torchrun-kill|torchrun-throw)
    how=${scenario#torchrun-}
    torchrun_pair fail "$how" 1 3
    [ "$rc0" != 0 ] && [ "$rc0" != 124 ] || fail "rank 0 exited with $rc0 (0: did not notice; 124: hung)"
    [ "$rc1" != 0 ] || fail "rank 1 exited 0"
    grep -q "ddp_worker.*error: volt: .*failed on rank 0 of 2" "$out.0" || fail "rank 0's error does not say a collective failed"
    [ "$how" != throw ] || grep -q "DDP rank 1: deliberate failure" "$out.0" || fail "rank 0 does not name rank 1's error"
    echo "rank 0 ended with status $rc0 after ${elapsed}s:"; grep error "$out.0" | head -3
    ;;
  missing-rank)
    port=$(free_port)
    start=$SECONDS
    clean_env TORCHELASTIC_RUN_ID=volt-test RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      VOLT_DDP_TIMEOUT_S=5 timeout 120 "$worker" equivalence plain > "$out" 2>&1
    rc=$?; elapsed=$(( SECONDS - start ))
    [ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "exit status $rc"
    grep -q "could not complete the rendezvous at 127.0.0.1:$port within 5 s" "$out" || fail "no rendezvous error"
    grep -q "1 of 2 processes joined; missing: rank 1" "$out" || fail "the error does not name the missing rank"
    # While it waits, rank 0 says whom it waits for, where and until when, repeated (every second here).
    reports=$(grep -c "volt: rank 0 of 2 is waiting at 127.0.0.1:$port for rank 1 (1 of 2 joined), until .* UTC (timeout 5 s)" "$out")
    [ "$reports" -ge 2 ] && [ "$reports" -le 6 ] || fail "$reports waiting reports, expected 2 to 6"
    [ "$elapsed" -lt 60 ] || fail "took ${elapsed}s"
    echo "ended with status $rc after ${elapsed}s, $reports waiting reports"; grep error "$out"
    ;;
  missing-host)
    # Rank 1 alone: rank 0, which hosts the rendezvous, never comes.
    port=$(free_port)
    start=$SECONDS
    clean_env TORCHELASTIC_RUN_ID=volt-test RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      VOLT_DDP_TIMEOUT_S=5 timeout 120 "$worker" equivalence plain > "$out" 2>&1
    rc=$?; elapsed=$(( SECONDS - start ))
    [ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "exit status $rc"
    grep -q "rank 0, which hosts the rendezvous, never answered" "$out" || fail "no error naming rank 0"
    reports=$(grep -c "volt: rank 1 of 2 is waiting for rank 0 to host the rendezvous at 127.0.0.1:$port, until .* UTC (timeout 5 s)" "$out")
    # Once a second over 5 s, not once per connection attempt.
    [ "$reports" -ge 2 ] && [ "$reports" -le 6 ] || fail "$reports waiting reports, expected 2 to 6"
    [ "$elapsed" -lt 60 ] || fail "took ${elapsed}s"
    echo "ended with status $rc after ${elapsed}s, $reports waiting reports"; grep error "$out"
    ;;
  *) echo "unknown scenario $scenario"; exit 2 ;;
esac
echo "PASSED: $scenario"

#!/usr/bin/env bash
# Multi-node DDP on one machine: two hosts made of network namespaces joined by a veth link (10.231.0.1 and
# 10.231.0.2, nothing else reachable), each running its share of the ranks of one Trainer<CPU, DDP> over Gloo.
#   run_multinode.sh WORKER SCENARIO
# Scenarios (2 nodes x 2 processes, WORLD_SIZE 4):
#   launcher   each node's first process started with NODE_RANK, MASTER_ADDR and MASTER_PORT; volt's launcher
#              starts the node's second process;
#   torchrun   all four processes started with torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, GROUP_RANK);
#   slurm      all four started with SLURM's (SLURM_NTASKS, SLURM_PROCID, SLURM_LOCALID, SLURM_NODEID,
#              SLURM_NODELIST: the first host is the main address);
#   kill-node  as launcher, then rank 2 kills node 1 (both of its processes, SIGKILL) after step 3: node 0's
#              ranks must exit non-zero within the timeout, naming the lost ranks, and no process may be left;
#   kill-main-node  the same with node 0 (rank 0, the rendezvous store's host) killed: node 1's ranks must say so.
# Needs root with CAP_NET_ADMIN (ip netns); exits 77 (a skip) without. Exits 0 when the scenario behaved.
set -uo pipefail
worker=$1
scenario=$2
tag="vmn$$"
ns=("$tag-0" "$tag-1")
address=(10.231.0.1 10.231.0.2)
port=29611
out=$(mktemp -d)

cleanup() {
  for n in "${ns[@]}"; do
    ip netns pids "$n" 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns del "$n" 2>/dev/null
  done
  rm -rf "$out"
}
trap cleanup EXIT
fail() {
  echo "FAILED: $*"
  for f in "$out"/*.log; do echo "---- $(basename "$f")"; cat "$f"; done
  exit 1
}

if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null || ! ip netns add "${ns[0]}" 2>/dev/null; then
  echo "SKIPPED: network namespaces need root with CAP_NET_ADMIN and iproute2 (ip netns add failed)"
  exit 77
fi
ip netns add "${ns[1]}" || fail "ip netns add ${ns[1]}"
ip link add "${tag}a" type veth peer name "${tag}b" || fail "ip link add veth"
for i in 0 1; do
  link="${tag}$([ $i = 0 ] && echo a || echo b)"
  ip link set "$link" netns "${ns[$i]}" || fail "move $link"
  ip -n "${ns[$i]}" addr add "${address[$i]}/24" dev "$link" || fail "address ${address[$i]}"
  ip -n "${ns[$i]}" link set "$link" up || fail "link up"
  ip -n "${ns[$i]}" link set lo up || fail "lo up"
done

# run NODE LOG VARIABLE=VALUE... -- ARGS...: starts the worker on host NODE in a session of its own (so that
# kill(0) reaches every process of that node), with only the listed variables of the distributed setup.
pids=()
run() {
  local node=$1 log=$2; shift 2
  local vars=()
  while [ "$1" != "--" ]; do vars+=("$1"); shift; done
  shift
  local link="${tag}$([ "$node" = 0 ] && echo a || echo b)"
  ip netns exec "${ns[$node]}" env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u NODE_RANK -u GROUP_RANK \
    -u MASTER_ADDR -u MASTER_PORT -u TORCHELASTIC_RUN_ID -u SLURM_NTASKS -u SLURM_JOB_NAME \
    GLOO_SOCKET_IFNAME="$link" VOLT_DDP_TIMEOUT_S=${TIMEOUT_S:-60} "${vars[@]}" \
    setsid timeout 240 "$worker" "$@" > "$out/$log.log" 2>&1 &
  pids+=($!)
}
wait_all() {
  codes=()
  for pid in "${pids[@]}"; do wait "$pid"; codes+=($?); done
}

start=$SECONDS
case "$scenario" in
  launcher|kill-node|kill-main-node)
    args=(multinode 2 2)
    [ "$scenario" = kill-node ] && args=(fail kill-node 2 3 2 2)
    [ "$scenario" = kill-main-node ] && args=(fail kill-node 0 3 2 2)
    for node in 0 1; do
      run "$node" "node$node" NODE_RANK=$node MASTER_ADDR="${address[0]}" MASTER_PORT=$port -- "${args[@]}"
    done
    ;;
  torchrun)
    for rank in 0 1 2 3; do
      node=$(( rank / 2 ))
      run "$node" "rank$rank" TORCHELASTIC_RUN_ID=volt-multinode RANK=$rank WORLD_SIZE=4 LOCAL_RANK=$(( rank % 2 )) \
        GROUP_RANK=$node MASTER_ADDR="${address[0]}" MASTER_PORT=$port -- multinode 2 2
    done
    ;;
  slurm)
    for rank in 0 1 2 3; do
      node=$(( rank / 2 ))
      run "$node" "rank$rank" SLURM_NTASKS=4 SLURM_JOB_NAME=volt-multinode SLURM_JOB_ID=4242 SLURM_PROCID=$rank \
        SLURM_LOCALID=$(( rank % 2 )) SLURM_NODEID=$node SLURM_NODELIST="${address[0]},${address[1]}" \
        MASTER_PORT=$port -- multinode 2 2
    done
    ;;
  *) echo "unknown scenario $scenario"; exit 2 ;;
esac
wait_all
elapsed=$(( SECONDS - start ))
all=$(cat "$out"/*.log)

case "$scenario" in
  launcher|torchrun|slurm)
    for i in "${!codes[@]}"; do [ "${codes[$i]}" = 0 ] || fail "process $i exited with ${codes[$i]}"; done
    for rank in 0 1 2 3; do
      grep -q "rank $rank of 4 on node $(( rank / 2 )): global_step 24" <<< "$all" || fail "rank $rank did not finish on node $(( rank / 2 ))"
    done
    grep -q "multinode 2x2: global_step ddp 24 single 24" <<< "$all" || fail "no comparison with one process"
    echo "$scenario: 2 nodes x 2 processes in ${elapsed}s; $(grep -o 'max |difference| = .*' <<< "$all")"
    ;;
  kill-node)
    [ "${codes[0]}" != 0 ] && [ "${codes[0]}" != 124 ] || fail "node 0 exited with ${codes[0]} (0: did not notice; 124: hung)"
    grep -q "global_step 24\|finished without noticing" "$out/node0.log" && fail "node 0 trained on after node 1 was killed"
    grep -q "failed on rank 0 of 4 (gloo): .*ranks 2, 3 of 4 are gone: their heartbeat" "$out/node0.log" ||
      fail "rank 0's error does not name node 1's ranks 2 and 3"
    grep -q "failed on rank 1 of 4 (gloo): .*ranks 2, 3 of 4 are gone: their heartbeat" "$out/node0.log" ||
      fail "rank 1's error does not name node 1's ranks 2 and 3"
    left=$(ip netns pids "${ns[0]}"; ip netns pids "${ns[1]}")
    [ -z "$left" ] || fail "processes left: $left"
    echo "kill-node: node 0 ended with status ${codes[0]} after ${elapsed}s:"
    grep -E "error|rank [23]" "$out/node0.log" | head -3
    ;;
  kill-main-node)
    [ "${codes[1]}" != 0 ] && [ "${codes[1]}" != 124 ] || fail "node 1 exited with ${codes[1]} (0: did not notice; 124: hung)"
    for rank in 2 3; do
      grep -q "failed on rank $rank of 4 (gloo): the rendezvous store on rank 0's host cannot be reached" "$out/node1.log" ||
        fail "rank $rank's error does not say that rank 0's host is lost"
    done
    left=$(ip netns pids "${ns[0]}"; ip netns pids "${ns[1]}")
    [ -z "$left" ] || fail "processes left: $left"
    echo "kill-main-node: node 1 ended with status ${codes[1]} after ${elapsed}s:"
    grep -E "error" "$out/node1.log" | head -2
    ;;
esac
exit 0

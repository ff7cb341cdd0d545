#!/bin/bash
# Thread-scaling sweep for the 16-core device machine.
#   run_scaling.sh OUT_DIR [ROUNDS] [BUDGET_SECONDS]
# canopy and asio: canopy_bench_static (fully static, no tbb objects).
# tbb: canopy_bench_dyn (the same LTO objects + tbb.cpp, dynamically linked)
# run through the bundled loader and libraries in lib/.
# Each round: every workload x thread count x peer, interleaved. After the
# main rounds, one round (numbered after the last) of the extra workloads, on
# every peer, if the budget allows. No run starts once BUDGET_SECONDS have
# passed. bench/results/scaling_16core.md says how the binaries were built and
# how this ran on the 16-core machine.
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: run_scaling.sh OUT_DIR [ROUNDS] [BUDGET_SECONDS]}
rounds=${2:-3}
budget=${3:-300}
# PEERS: the peers of the main rounds; FIRST_ROUND: the number of the first.
peers=${PEERS:-canopy asio tbb}
first_round=${FIRST_ROUND:-1}
mkdir -p "$out"
results=$out/scaling_16core.jsonl
log=$out/run.log
: >"$results"

static=("$here/canopy_bench_static")
dynamic=("$here/lib/ld-linux-x86-64.so.2" --library-path "$here/lib" "$here/canopy_bench_dyn")

{
  echo "== date"; date -u
  echo "== nproc"; nproc
  echo "== lscpu"; lscpu
  echo "== cgroup cpu.max"; cat /sys/fs/cgroup/cpu.max 2>/dev/null || echo none
  echo "== affinity"; taskset -p $$ 2>/dev/null || grep Cpus_allowed_list /proc/self/status
  echo "== uname"; uname -a
  echo "== loadavg"; cat /proc/loadavg
  echo "== meminfo"; head -3 /proc/meminfo
} >"$out/machine.txt" 2>&1

start=$SECONDS
runs=0 failures=0

# run_one ROUND WORKLOAD THREADS PEER
run_one() {
  local round=$1 workload=$2 threads=$3 peer=$4 command binary line rc
  if [ "$peer" = tbb ]; then command=("${dynamic[@]}") binary=dynamic; else command=("${static[@]}") binary=static; fi
  line=$(timeout 40 "${command[@]}" "$workload" --peer "$peer" --threads "$threads" 2>>"$log")
  rc=$?
  runs=$((runs + 1))
  if [ $rc -eq 0 ] && [[ "$line" == \{*\} ]]; then
    echo "${line%\}},\"round\":$round,\"binary\":\"$binary\"}" >>"$results"
  else
    failures=$((failures + 1))
    echo "{\"peer\":\"$peer\",\"workload\":\"$workload\",\"threads\":$threads,\"round\":$round,\"failed\":$rc}" >>"$results"
    echo "FAILED rc=$rc: $workload --peer $peer --threads $threads" | tee -a "$log"
  fi
}

out_of_time() { [ $((SECONDS - start)) -ge "$budget" ]; }

sweep() {  # ROUND PEERS WORKLOADS...
  local round=$1 sweep_peers=$2 workload threads peer
  shift 2
  for workload in "$@"; do
    for threads in 1 2 4 8 16; do
      for peer in $sweep_peers; do
        if out_of_time; then return 1; fi
        run_one "$round" "$workload" "$threads" "$peer"
      done
    done
    echo "round $round $workload done at $((SECONDS - start)) s"
  done
}

completed=0
last_round=$((first_round + rounds - 1))
for round in $(seq "$first_round" "$last_round"); do
  sweep "$round" "$peers" spawn_remote yield_many fib fib_join || { echo "budget reached in round $round"; break; }
  completed=$round
done
if [ "$completed" -eq "$last_round" ]; then
  sweep $((last_round + 1)) "canopy asio tbb" fan_out irregular_tree || echo "budget reached in the extra round"
fi
echo "runs=$runs failures=$failures completed_rounds=$completed elapsed=$((SECONDS - start)) s" | tee -a "$log"

#!/usr/bin/env bash
# One process a rank (docs/parallel.md "One process per rank"): mcirc run
# by 2 and 4 processes with a launcher's environment (RANK, WORLD_SIZE,
# MASTER_ADDR=127.0.0.1, MASTER_PORT), on the CPU reference and the
# emulated device, --verify per rank; every rank's output file equal, byte
# for byte, to the one-process run's; --tp 2 the same way; and the
# failures: a rank that never comes (named, within the timeout), WORLD_SIZE
# not the graph's ranks, ranks whose programs disagree (named on both).
#   tests/launch_ranks.sh MCIRC SOURCE_DIR
set -uo pipefail
mcirc=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
bad() { echo "FAIL: $*" >&2; fail=1; }

free_port() {   # a free TCP port on the loopback address
  if command -v python3 >/dev/null; then
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
  else
    echo $((20000 + RANDOM % 20000))
  fi
}

# launch N OUTDIR GRAPH ARGS...: N processes; their logs in OUTDIR.logR, exit codes in OUTDIR.rcR
launch() {
  local n=$1 out=$2 graph=$3
  shift 3
  local port
  port=$(free_port)
  local pids=()
  for ((r = 0; r < n; r++)); do
    RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$((port - 1)) \
      MCIR_RENDEZVOUS_PORT=$port MCIR_RENDEZVOUS_TIMEOUT=${TIMEOUT:-60} \
      "$mcirc" "$graph" "$@" -o "$out" >"$out.log$r" 2>&1 &
    pids+=($!)
  done
  for ((r = 0; r < n; r++)); do
    wait "${pids[$r]}"
    echo $? >"$out.rc$r"
  done
}

# same ONE_DIR MANY_DIR N NAME: every rank's NAME.rankR.npy equals the one-process run's
same() {
  local one=$1 many=$2 n=$3 name=$4
  for ((r = 0; r < n; r++)); do
    local want=$one/$name.npy
    [ -f "$want" ] || want=$one/$name.rank$r.npy
    cmp -s "$want" "$many/$name.rank$r.npy" || bad "$many: $name (rank $r) differs from the one-process run"
  done
}

check_ok() {   # check_ok DIR N: every rank exit 0 and verified
  local out=$1 n=$2
  for ((r = 0; r < n; r++)); do
    [ "$(cat "$out.rc$r")" = 0 ] || { bad "$out rank $r: exit $(cat "$out.rc$r")"; cat "$out.log$r" >&2; continue; }
    grep -q "one process a rank: this is rank $r" "$out.log$r" || bad "$out rank $r: no ranks line"
    grep -q "verify   y (rank $r): max abs err" "$out.log$r" || bad "$out rank $r: no verify line"
  done
}

export MCIR_CACHE_DIR=${MCIR_CACHE_DIR:-$work/cache}
# the CPU reference, 2 processes
"$mcirc" "$src/tests/data/ranks/mlp.json" --run --device cpu -o "$work/mlp1" >/dev/null || bad "one-process mlp"
launch 2 "$work/mlp2" "$src/tests/data/ranks/mlp.json" --run --device cpu --verify
check_ok "$work/mlp2" 2
same "$work/mlp1" "$work/mlp2" 2 y
# the emulated device, 4 processes, the collectives checked here and combined at rank 0
"$mcirc" "$src/tests/data/ranks/gather.json" --run --device emu -o "$work/g1" >/dev/null || bad "one-process emu"
launch 4 "$work/g4" "$src/tests/data/ranks/gather.json" --run --device emu --verify
check_ok "$work/g4" 4
for r in 0 1 2 3; do
  grep -q "verify   y (emu vs the original graph) (rank $r)" "$work/g4.log$r" || bad "emu rank $r: no device verify"
done
same "$work/g1" "$work/g4" 4 y
# --tp 2 of a bundled example: the rewrite in every process, one rank each
ex=$src/examples/mlp_tiny/graph.json
"$mcirc" "$ex" --tp 2 --run --device cpu -o "$work/tp1" >/dev/null || bad "one-process --tp 2"
launch 2 "$work/tp2" "$ex" --tp 2 --run --device cpu --verify
check_ok "$work/tp2" 2
same "$work/tp1" "$work/tp2" 2 y

# failures
TIMEOUT=2 launch 1 "$work/alone" "$src/tests/data/ranks/mlp.json" --run --device cpu
# (WORLD_SIZE 1 for a 2-rank graph: refused before any rendezvous)
[ "$(cat "$work/alone.rc0")" = 2 ] && grep -q "the launcher started 1 processes (WORLD_SIZE=1)" "$work/alone.log0" ||
  { bad "WORLD_SIZE 1 for 2 ranks"; cat "$work/alone.log0" >&2; }
port=$(free_port)
RANK=0 WORLD_SIZE=2 MASTER_PORT=$((port - 1)) MCIR_RENDEZVOUS_TIMEOUT=2 \
  "$mcirc" "$src/tests/data/ranks/mlp.json" --run --device cpu >"$work/missing.log" 2>&1
rc=$?
[ $rc = 3 ] && grep -q "1 of 2 ranks joined rank 0 .* within 2 s; missing rank 1" "$work/missing.log" ||
  { bad "a missing rank (exit $rc)"; cat "$work/missing.log" >&2; }
port=$(free_port)
RANK=0 WORLD_SIZE=2 MASTER_PORT=$((port - 1)) MCIR_RENDEZVOUS_TIMEOUT=20 \
  "$mcirc" "$src/tests/data/ranks/mlp.json" --run --device cpu >"$work/dis0.log" 2>&1 &
pid=$!
RANK=1 WORLD_SIZE=2 MASTER_PORT=$((port - 1)) MCIR_RENDEZVOUS_TIMEOUT=20 \
  "$mcirc" "$src/tests/data/ranks/scatter.json" --run --device cpu >"$work/dis1.log" 2>&1
rc1=$?
wait $pid
rc0=$?
for r in 0 1; do
  grep -q "rank 1 called reduce_scatter (24 elements, type 0, op 0) where rank 0 called all_reduce" "$work/dis$r.log" ||
    { bad "disagreeing ranks: rank $r's message"; cat "$work/dis$r.log" >&2; }
done
[ $rc0 = 1 ] && [ $rc1 = 1 ] || bad "disagreeing ranks: exit $rc0 and $rc1, not 1"
RANK=7 WORLD_SIZE=2 MASTER_PORT=29500 "$mcirc" "$src/tests/data/ranks/mlp.json" --run >"$work/env.log" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "RANK=7: not a rank of WORLD_SIZE 2" "$work/env.log" || { bad "RANK=7 (exit $rc)"; cat "$work/env.log" >&2; }
[ $fail = 0 ] && echo "one process a rank: cpu (2), emu (4), --tp 2, and the failures: ok"
exit $fail

#!/usr/bin/env bash
# report_budget_test.sh MCIRC MEMPLAN SRC OUT — long work is bounded and
# visible (docs/report.md "Drawing in bounded time", docs/cli.md "Progress").
# 1. The report's drawing budget: with a `dot` that never finishes a
#    node-level layout (it sleeps) and --report-time 2, mcirc still ends
#    within seconds; the graph after rewriting is drawn kernel by kernel
#    (ids "kernel:NAME"), the graph as read is left out, and the page says
#    both; nothing of the killed runs is left behind.
# 2. A graph of more nodes than are drawn node by node (a 2 100-op chain).
# 3. Progress: on a terminal (script(1) gives one) the waiting report and
#    mcir-memplan's exact search draw a progress line and erase it; with
#    stderr a file they print nothing.
# Exit 77 where Graphviz's dot is not installed.
set -uo pipefail
mcirc=$1 memplan=$2 src=$3 out=$4
real_dot=$(command -v dot) || { echo "skip: Graphviz's dot is not installed"; exit 77; }
rm -rf "$out"; mkdir -p "$out/bin"
fail=0
bad() { echo "FAIL $*"; fail=1; }
# a dot that hangs on the node-level graphs (they carry "node:" ids) and
# lays out the kernel-level one with the real dot
cat >"$out/bin/dot" <<EOS
#!/bin/sh
if grep -q 'id="node:' "\$4"; then exec sleep 37.25; fi
exec "$real_dot" "\$@"
EOS
chmod +x "$out/bin/dot"
graph=$src/examples/gpt2_block/graph.json
mkdir -p "$out/tmp"
t0=$(date +%s%N)
TMPDIR=$out/tmp PATH=$out/bin:$PATH "$mcirc" --report-time 2 --report "$out/r.html" "$graph" >"$out/summary" 2>"$out/err"
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
[ $rc = 0 ] || bad "mcirc exit $rc: $(head -3 "$out/err")"
echo "mcirc --report-time 2 with a hanging dot: $ms ms"
[ $ms -lt 8000 ] || bad "took $ms ms with a 2 s budget"
[ -s "$out/err" ] && bad "stderr is not a terminal, yet: $(head -c 200 "$out/err" | cat -v)"
grep -q 'id="kernel:' "$out/r.html" || bad "no kernel-level drawing"
grep -q 'id="node:' "$out/r.html" && bad "a node-level drawing is there"
grep -q 'after rewriting (.* nodes) did not lay out within 1 s, half of the report&#39;s drawing time (--report-time 2)' "$out/r.html" ||
  bad "no note that the node-level drawing was replaced"
grep -q 'This is the kernel-level graph: one box per kernel' "$out/r.html" || bad "no note on the kernel-level graph"
grep -q 'as read (.* nodes) did not lay out within the report&#39;s drawing time, 2 s (--report-time): the drawing is left out' "$out/r.html" ||
  bad "no note that the graph as read is left out"
# mcirc kills a late dot's process group and reaps it before it returns:
# nothing of it may be left, with no wait here
grep -qs '3[7].25' /proc/[0-9]*/cmdline && bad "a killed dot run is still there"
[ -z "$(ls -A "$out/tmp")" ] || bad "temporary files are left: $(ls "$out/tmp")"
# 2. more nodes than are drawn node by node: the kernel-level graph at once
# after rewriting, the graph as read left out, each with its note
chain=$out/chain.json ops=(relu sigmoid tanh neg exp neg)
{ echo '{"mcir": 1, "name": "chain2100", "inputs": [{"name": "x", "dtype": "f32", "shape": [8, 8]}], "nodes": ['
  for i in $(seq 0 2099); do
    in=t$((i - 1)); [ $i = 0 ] && in=x
    o=t$i; [ $i = 2099 ] && o=y
    sep=,; [ $i = 2099 ] && sep=
    echo "{\"name\": \"n$i\", \"op\": \"${ops[i % 6]}\", \"inputs\": [\"$in\"], \"outputs\": [\"$o\"]}$sep"
  done
  echo '], "outputs": ["y"]}'; } >"$chain"
TMPDIR=$out/tmp "$mcirc" --report "$out/chain.html" "$chain" >/dev/null 2>"$out/chain-err" || bad "chain: $(head -3 "$out/chain-err")"
grep -q 'The graph after rewriting has 2100 nodes, more than the 2000 drawn node by node' "$out/chain.html" &&
  grep -q 'This is the kernel-level graph' "$out/chain.html" && grep -q 'id="kernel:' "$out/chain.html" ||
  bad "chain: no kernel-level drawing with its note"
grep -q 'The graph as read has 2100 nodes, more than the 2000 drawn node by node .*The drawing is left out.' "$out/chain.html" ||
  bad "chain: the graph as read is not said to be left out"
if command -v script >/dev/null; then
  PATH=$out/bin:$PATH script -qefc "'$mcirc' --report-time 2 --report '$out/t.html' '$graph' >/dev/null" "$out/tty-report" >/dev/null
  grep -q $'\r  report   drawing the graphs with Graphviz (at most 2 s), [0-9]* s' "$out/tty-report" ||
    bad "no progress line on a terminal: $(cat -v "$out/tty-report" | head -c 300)"
  grep -q $'\r\e\[K' "$out/tty-report" || bad "the progress line is not erased"
  mp=$src/bench/data/minimalloc/D.1048576.csv
  script -qefc "'$memplan' --time-limit 1.5 '$mp' >/dev/null" "$out/tty-memplan" >/dev/null
  grep -q $'\r  memplan  [0-9]* search nodes' "$out/tty-memplan" ||
    bad "mcir-memplan shows no progress on a terminal: $(cat -v "$out/tty-memplan" | head -c 300)"
  "$memplan" --time-limit 1.5 "$mp" 2>"$out/memplan-err" >/dev/null
  grep -q $'\r' "$out/memplan-err" && bad "mcir-memplan draws progress into a file"
else
  echo "script(1) missing: the terminal half is not checked"
fi
[ $fail = 0 ] && echo "ok"
exit $fail

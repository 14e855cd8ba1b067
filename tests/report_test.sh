#!/usr/bin/env bash
# report_test.sh MCIRC SRC OUT — the HTML report as a person sees it.
# 1. Every example gets a report: exit 0, one self-contained file (no
#    http(s) references), its data, and the graph drawings where Graphviz's
#    dot is installed.
# 2. One report (gpt2_block) opens in headless Chromium: its script runs
#    without error (the page marks <body data-rendered="ok">, or data-error),
#    the trace and kernel tables have rows, both drawings and the arena are
#    there; a screenshot is taken (OUT/report.png).
# Exit 77 (skip) for step 2 only where Chromium is not installed
# (scripts/test.sh installs it with the other test dependencies).
set -uo pipefail
mcirc=$1 src=$2 out=$3
mkdir -p "$out"
fail=0 n=0
have_dot=0; command -v dot >/dev/null && have_dot=1
for g in "$src"/examples/*/graph.json; do
  name=$(basename "$(dirname "$g")")
  html=$out/$name.html
  n=$((n + 1))
  if ! "$mcirc" --report "$html" "$g" >/dev/null 2>"$out/$name.err"; then
    echo "FAIL $name: mcirc --report failed: $(head -3 "$out/$name.err")"; fail=$((fail + 1)); continue
  fi
  problems=()
  grep -q 'id="data"' "$html" || problems+=("no data")
  grep -q '"trace":\[{' "$html" || problems+=("empty trace")
  grep -Eq 'src="https?:|href="https?:' "$html" && problems+=("refers to the network")
  if ((have_dot)); then
    [ "$(grep -o '<svg' "$html" | wc -l)" -ge 3 ] || problems+=("fewer than 3 SVG drawings")
    grep -q 'id="node:' "$html" || problems+=("no node ids in the drawings")
  else
    grep -q "dot is not installed" "$html" || problems+=("no note about the missing dot")
  fi
  if ((${#problems[@]})); then echo "FAIL $name: ${problems[*]}"; fail=$((fail + 1))
  else echo "ok   $name ($(stat -c %s "$html") bytes)"; fi
done
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
  echo "$((n - fail)) passed, $fail failed (headless Chromium not installed: page not rendered)"
  [ $fail -eq 0 ] && exit 77 || exit 1
fi
page="file://$(cd "$out" && pwd)/gpt2_block.html"
flags=(--headless --no-sandbox --disable-gpu --disable-dev-shm-usage --hide-scrollbars
       --virtual-time-budget=5000 --user-data-dir="$out/chromium-profile")
timeout 120 "$browser" "${flags[@]}" --dump-dom "$page" >"$out/dom.html" 2>"$out/chromium.log"
n=$((n + 1))
problems=()
grep -q '<body data-rendered="ok"' "$out/dom.html" || problems+=("script did not finish: $(grep -o '<body[^>]*>' "$out/dom.html" | head -1)")
rows=$(grep -o '<tr class="applied"' "$out/dom.html" | wc -l)
[ "$rows" -ge 5 ] || problems+=("trace table has $rows applied rows")
krows=$(sed -n '/<table id="kernels"/,/<\/table>/p' "$out/dom.html" | grep -o '<tr>' | wc -l)
[ "$krows" -ge 4 ] || problems+=("kernel table has $krows rows")
for id in g-after g-before arena; do grep -q "id=\"$id\"" "$out/dom.html" || problems+=("no #$id"); done
timeout 120 "$browser" "${flags[@]}" --window-size=1400,1600 --screenshot="$out/report.png" "$page" \
  >/dev/null 2>>"$out/chromium.log"
[ -s "$out/report.png" ] && [ "$(stat -c %s "$out/report.png")" -gt 20000 ] || problems+=("no screenshot")
if ((${#problems[@]})); then echo "FAIL chromium: ${problems[*]}"; fail=$((fail + 1))
else echo "ok   chromium: rendered, $rows applied trace rows, $krows kernels, screenshot $out/report.png"; fi
echo "$((n - fail)) passed, $fail failed"
[ $fail -eq 0 ]

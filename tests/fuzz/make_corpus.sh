#!/usr/bin/env bash
# Rebuilds the seed corpora of tests/fuzz/corpus/ from the project's own
# inputs: examples, goldens, the good and malformed test corpora. Files over
# MAX bytes are left out so the committed corpora stay small (< 2 MB in all).
# Regression inputs (tests/fuzz/regress/) are kept by hand, never rebuilt.
set -euo pipefail
cd "$(dirname "$0")/../.."
MAX=${MAX:-65536}
out=tests/fuzz/corpus
rm -rf "$out"
mkdir -p "$out"/{graph_json,pipeline,catalog,onnx,npy,memplan_csv}
put() { # put DIR FILE...: copy each small file, named by its path
  local dir=$1; shift
  for f in "$@"; do
    [ -f "$f" ] && [ "$(stat -c %s "$f")" -le "$MAX" ] || continue
    cp "$f" "$out/$dir/$(echo "$f" | tr / _)"
  done
}
put graph_json tests/data/good/*.json tests/data/bad/*.json tests/data/ints/*.json examples/*/graph.json \
  tests/golden/*/input.json tests/data/dims/*.json tests/data/ranks/*.json
put pipeline tests/data/good/*.json tests/data/ints/*.json examples/*/graph.json tests/golden/*/input.json \
  tests/data/dims/*.json tests/data/ranks/*.json
put catalog catalog/default.yaml tests/data/catalog/good/*.yaml tests/data/catalog/bad/*.yaml
put onnx tests/data/onnx/bad/*.onnx tests/data/onnx/node/*/model.onnx tests/data/onnx/errors/dynamic_input.onnx \
  tests/data/onnx/dims/errors/*.onnx
put npy tests/data/bad/npy/*.npy tests/data/good/w/*.npy
put memplan_csv tests/data/memplan/*.csv
du -sh "$out"/* "$out"

#!/usr/bin/env bash
# doc_refs_test.sh SRC — comments and scripts point at documents that are in
# the project: every page of docs/ named in the sources exists, and nothing
# names a spec/ file (the contracts the project was written against live
# outside it; docs/cli.md and docs/graph-format.md restate them).
set -uo pipefail
cd "$1" || exit 1
dirs=(mcir onnx catalog properties rewrites memplan kernelplan codegen runtime emu mcirc python tools bench scripts tests cmake)
globs=(--include='*.c' --include='*.h' --include='*.py' --include='*.sh' --include='*.cmake'
       --include='*.yaml' --include='*.cuh' --include=CMakeLists.txt)
fail=0
while IFS=: read -r file line ref; do
  [ -f "$ref" ] && continue
  echo "$file:$line: error: names $ref, which is not in the project"; fail=1
done < <(grep -rnoE "${globs[@]}" 'docs/[A-Za-z0-9_.-]+\.md' "${dirs[@]}" | grep -v '^tests/doc_refs_test.sh:')
while IFS= read -r hit; do
  echo "${hit%%:*}:$(cut -d: -f2 <<<"$hit"): error: names a spec/ document outside the project (point at docs/)"; fail=1
done < <(grep -rnE "${globs[@]}" '(^|[^A-Za-z0-9_])spec/[A-Za-z0-9_-]+\.md' "${dirs[@]}" | grep -v '^tests/doc_refs_test.sh:')
[ $fail -eq 0 ] && echo "ok: every docs/ reference exists, none to spec/"
exit $fail

#!/usr/bin/env bash
# layering_test.sh SRC — the layering of docs/architecture.md ("Folders"),
# read off the tree: every `#include "DIR/..."` of a folder's sources must
# name a header the folder may call. A header listed with its name is the
# only one of its folder allowed; a folder listed alone allows all of it.
# Fails naming the file, the line and the include.
set -uo pipefail
src=${1:-$(dirname "$0")/..}
cd "$src" || exit 1
declare -A may=(
  [mcir]=""
  [memplan]=""
  [onnx]="mcir"
  [properties]="mcir kernelplan/launch.h kernelplan/launch_sm90.h kernelplan/launch_gemm_sm90.h"
  [catalog]="mcir properties"
  [rewrites]="mcir catalog properties"
  [kernelplan]="mcir memplan properties"
  # codegen makes modules: it never includes runtime/, and of emu/ only the module builder
  [codegen]="mcir properties/target.h kernelplan emu/compile.h"
  # runtime reads codegen's module format and public header, never its internals
  [runtime]="mcir properties/target.h kernelplan codegen/module.h codegen/codegen.h emu/emu.h emu/compile.h"
  # emu depends on nothing above it: of runtime/ only the device interface it implements
  [emu]="mcir properties/target.h runtime/cuda_driver.h runtime/blas_api.h runtime/coll_api.h"
)
fail=0
for dir in "${!may[@]}"; do
  allowed=" $dir ${may[$dir]} "
  while IFS=: read -r file line text; do
    inc=$(sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]+)".*/\1/' <<<"$text")
    top=${inc%%/*}
    [[ $inc == */* ]] || continue                  # a sibling header
    [[ $allowed == *" $top "* || $allowed == *" $inc "* ]] && continue
    echo "$file:$line: $dir/ may not include \"$inc\" (docs/architecture.md, \"Folders\")"
    fail=1
  done < <(grep -rn --include='*.c' --include='*.h' --include='*.cuh' -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$dir")
done
# the device interface emu/ implements includes nothing of the project
for h in runtime/cuda_driver.h runtime/blas_api.h runtime/coll_api.h emu/compile.h codegen/module.h; do
  grep -n -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$h" | grep -v '"codegen/codegen.h"' |
    sed "s#^#$h:#; s#\$#: an interface header includes the project#" | grep . && fail=1
done
[ $fail = 0 ] && echo "ok: ${#may[@]} folders, every include allowed"
exit $fail

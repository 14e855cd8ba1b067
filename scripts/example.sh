#!/usr/bin/env bash
# The README's first command: install what is missing, build, and compile
# the bundled GPT-2 block with mcirc, checking the rewrite numerically.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh build
exec build/mcirc/mcirc --verify "${@:-examples/gpt2_block/graph.json}"

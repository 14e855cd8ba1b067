# Limits at the command line (docs/graph-format.md "Limits"): every
# regression input of tests/fuzz/regress/{graph_json,onnx} that is not named
# ok_* makes mcirc exit 1 with a "PATH:LINE:COL: error:" (graph.json) or
# "PATH: error:" (ONNX) message and nothing else on stderr (in the sanitizer
# build a sanitizer report fails the test: it aborts, exit 134); the ok_*
# ones, a graph with no nodes and attention with head dim 1024, compile, run
# on the CPU and verify (exit 0). The head-dim-1024 graph still cannot be
# planned for the GPU: --emit cuda refuses it with a message (exit 1).
if(TARGET mcirc)
  set(_rg ${PROJECT_SOURCE_DIR}/tests/fuzz/regress)
  set(_onnx_loop "")
  if(TARGET mcir_onnx)
    set(_onnx_loop "for f in ${_rg}/onnx/*.onnx; do reject $f ':'; done")
  endif()
  add_test(NAME mcirc_limits COMMAND sh -c "
    m=$<TARGET_FILE:mcirc> out=$(mktemp -d) fail=0
    trap 'rm -rf $out' EXIT
    reject() { f=$1 pat=$2
      \"$m\" \"$f\" >$out/stdout 2>$out/stderr; got=$?
      if [ $got != 1 ]; then echo \"$f: exit $got, wanted 1\"; cat $out/stderr; fail=1; return; fi
      if grep -qv \"^$f$pat error: \" $out/stderr; then
        echo \"$f: stderr has more than PATH$pat error: lines:\"; cat $out/stderr; fail=1; fi
      grep -q . $out/stderr || { echo \"$f: no message\"; fail=1; }; }
    for f in ${_rg}/graph_json/*.json; do
      case $(basename $f) in ok_*) continue;; esac
      reject $f ':[0-9]*:[0-9]*:'; done
    ${_onnx_loop}
    for f in ${_rg}/graph_json/ok_*.json ${_rg}/pipeline/ok_*.json; do
      \"$m\" --run --device cpu --verify $f >$out/stdout 2>$out/stderr ||
        { echo \"$f: exit $?, wanted 0\"; cat $out/stderr; fail=1; }
      grep -q 'verify .* ok' $out/stdout || { echo \"$f: not verified\"; cat $out/stdout; fail=1; }
    done
    f=${_rg}/pipeline/ok_attention_head_dim_1024.json
    \"$m\" --run --device cpu $f >$out/stdout 2>$out/stderr ||
      { echo \"$f: --run --device cpu failed\"; fail=1; }
    grep -q 'warning: .*head dim 1024 does not fit' $out/stderr ||
      { echo \"$f: no warning\"; cat $out/stderr; fail=1; }
    \"$m\" --emit cuda $f >$out/stdout 2>$out/stderr; got=$?
    [ $got = 1 ] && grep -q 'error: .*head dim 1024 does not fit' $out/stderr ||
      { echo \"$f: --emit cuda: exit $got, wanted 1 with a message\"; cat $out/stderr; fail=1; }
    \"$m\" -o $out/art --run --device cpu --verify ${_rg}/graph_json/ok_no_nodes.json >/dev/null ||
      { echo 'no_nodes: -o failed'; fail=1; }
    exit $fail")
  set_tests_properties(mcirc_limits PROPERTIES
    ENVIRONMENT "MCIR_CACHE_DIR=${CMAKE_BINARY_DIR}/kernel-cache")
endif()

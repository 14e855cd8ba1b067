# Memory planner: the Check suite, and the exit codes of mcir-memplan.
mcir_check_test(test_memplan SOURCES test_memplan.c LIBS mcir_memplan)

if(TARGET mcir-memplan)
  set(_mp ${PROJECT_SOURCE_DIR}/tests/data/memplan)
  set(_mm ${PROJECT_SOURCE_DIR}/bench/data/minimalloc)
  # Each command is expected to exit with the status in front of it.
  # The exact search's budget is wall-clock time (default 10 s); the fit of
  # B.1048576 takes ~135 000 nodes (0.4 s idle) but a loaded or sanitized
  # run could pass 10 s and exit 1, so that case gets an unreachable budget
  # and always runs the same search to its end (ctest's timeout bounds it).
  add_test(NAME memplan_cli_exit_codes COMMAND sh -c "
    t=$<TARGET_FILE:mcir-memplan>
    expect() { want=$1; shift; \"$@\" >/dev/null 2>&1; got=$?;
      [ $got = $want ] || { echo \"exit $got, wanted $want: $*\"; exit 1; }; }
    expect 0 $t --planner help
    expect 2 $t
    expect 2 $t --bogus ${_mp}/good.csv
    expect 2 $t --planner magic ${_mp}/good.csv
    expect 2 $t --capacity -5 ${_mp}/good.csv
    expect 1 $t ${_mp}/not_integer.csv
    expect 1 $t ${_mp}/huge_sizes.csv
    expect 1 $t --capacity 10 ${_mp}/good.csv
    expect 0 $t --capacity 24 ${_mp}/good.csv
    expect 0 $t --time-limit 1000000 --capacity 1048576 --fit-only ${_mp}/../../../bench/data/minimalloc/B.1048576.csv
    $t ${_mp}/not_integer.csv 2>&1 | grep -q 'not_integer.csv:3:7: error:' || exit 1
    $t --capacity 10 ${_mp}/good.csv 2>&1 | grep -q 'misses by 14 bytes' || exit 1
  ")
  # -o as every mcir writer (docs/cli.md \"Output files\"): '-' is stdout,
  # a link is written through, a failure leaves nothing.
  add_test(NAME memplan_cli_output_paths COMMAND sh -c "
    t=$<TARGET_FILE:mcir-memplan> d=$(mktemp -d) || exit 1; trap 'rm -rf $d' EXIT
    $t -o - ${_mp}/good.csv | grep -q '^id,lower,upper,size,offset' || { echo '-o - is not stdout'; exit 1; }
    [ ! -e ./- ] || { echo 'wrote a file named -'; exit 1; }
    ln -s placed.csv $d/link.csv
    $t -o $d/link.csv ${_mp}/good.csv || exit 1
    [ -L $d/link.csv ] && grep -q offset $d/placed.csv || { echo 'the link was not written through'; exit 1; }
    $t -o $d/nodir/x.csv ${_mp}/good.csv 2>$d/err; [ $? = 1 ] || { echo 'exit status'; exit 1; }
    grep -q '^'$d'/nodir/x.csv: error: cannot create a file in' $d/err || { cat $d/err; exit 1; }
    [ $(ls -A $d | wc -l) = 3 ] || { ls -A $d; exit 1; }
  ")
endif()

#!/usr/bin/env bash
# ferry-perf's command line as a user meets it, without starting any rank: test_perf_cli.sh FERRY_PERF
# Bad flags exit 2 with a message naming the flag and the usage text; --help exits 0.
set -u
PERF=${1:?usage: test_perf_cli.sh FERRY_PERF}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failures=0

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# expect RC TEXT ARGS...: ferry-perf ARGS exits RC and prints TEXT (stdout or stderr).
expect() {
  local want=$1 text=$2
  shift 2
  "$PERF" "$@" >"$TMP/out" 2>"$TMP/err" </dev/null
  local rc=$?
  [[ $rc == "$want" ]] || fail "ferry-perf $*: exit $rc, expected $want; stderr: $(head -c 500 "$TMP/err")"
  grep -qF -- "$text" "$TMP/out" "$TMP/err" || fail "ferry-perf $*: no '$text' in: $(head -c 500 "$TMP/err")"
}

expect 2 "-b '12Q' is not a size" all_reduce -b 12Q
expect 2 "usage: ferry-perf COLLECTIVE" all_reduce -b 12Q
expect 2 "unknown flag '--bogus'" all_reduce --bogus
expect 2 "-d 'float8' is not a type" all_reduce -d float8
expect 2 "-n needs a value" all_reduce -n
expect 2 "'allreduce_fast' is not a collective" allreduce_fast
expect 0 "-J,--output_file" --help

[[ $failures == 0 ]] && echo "ferry-perf command line: all checks passed"
exit $((failures > 0))

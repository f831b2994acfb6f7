#!/usr/bin/env bash
# bench/gloo_perf.py, the sweep through torch.distributed's gloo backend, as bench/compare runs it:
#   test_gloo_perf.sh GLOO_PERF_PY CHECK_PERF_JSON
# Short sweeps at 2 and 3 ranks (at 3, every type, op and root) must exit 0 with #wrong 0 in every
# row and a JSON file that matches ferry-perf/1; reduce_scatter is reported as skipped; a bad flag
# is a usage error (exit 2). Skipped (exit 77) where Debian's python3-torch is not installed.
set -u
GLOO=${1:?usage: test_gloo_perf.sh GLOO_PERF_PY CHECK_PERF_JSON}
CHECK=${2:?}
/usr/bin/python3 -c 'import torch.distributed' 2>/dev/null || { echo "python3-torch is not installed: skipped"; exit 77; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# sweep N ROWS ARGS...: gloo-perf on N ranks, expecting ROWS table rows, all right.
sweep() {
  local n=$1 rows=$2
  shift 2
  timeout 300 /usr/bin/python3 "$GLOO" --nranks "$n" -J "$TMP/r.json" "$@" >"$TMP/out" 2>"$TMP/err" </dev/null
  local rc=$?
  [[ $rc == 0 ]] || { fail "$n ranks ($*): exit $rc; stderr: $(tail -c 2000 "$TMP/err")"; return; }
  local got bad
  got=$(awk '!/^#/ && NF == 13' "$TMP/out" | wc -l)
  bad=$(awk '!/^#/ && NF == 13 && ($9 != "0" || $13 != "0")' "$TMP/out")
  [[ $got == "$rows" ]] || fail "$n ranks ($*): $got table rows, expected $rows: $(head -c 3000 "$TMP/out")"
  [[ -z $bad ]] || fail "$n ranks ($*): wrong values: $bad"
  /usr/bin/python3 "$CHECK" "$TMP/r.json" --nranks "$n" >"$TMP/check" 2>&1 || fail "$n ranks ($*): $(cat "$TMP/check")"
}

# 2 ranks: 6 sizes of all_reduce, broadcast, reduce; 5 of all_gather, alltoall (8 B is 0 elements).
sweep 2 28 all_reduce reduce_scatter all_gather alltoall broadcast reduce -b 8 -e 256K -f 8 -n 2 -w 1
grep -q "skipping float sum: ProcessGroupGloo in torch 1.13 has no reduce_scatter" "$TMP/out" ||
  fail "reduce_scatter must be reported as skipped: $(grep reduce_scatter "$TMP/out")"
# 3 ranks, one size (the 2-rank sweep has six): 7 types (no uint32, uint64, bfloat16) x 4 ops (no
# avg) for all_reduce, x 3 roots for reduce; 7 types x 3 roots for broadcast.
sweep 3 133 all_reduce reduce broadcast -b 4K -e 4K -d all -o all -r all -n 1 -w 0
/usr/bin/python3 "$GLOO" --nranks 2 no_such_collective >"$TMP/out" 2>&1
[[ $? == 2 ]] || fail "an unknown collective must exit 2"
grep -q "'no_such_collective' is not a collective" "$TMP/out" || fail "the error must name the collective: $(cat "$TMP/out")"

[[ $failures == 0 ]] && echo "gloo_perf.py: all checks passed"
exit $((failures > 0))

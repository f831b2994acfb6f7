#!/usr/bin/env bash
# A short real sweep of one collective at 2 and 3 ranks through ferryrun, as a user runs it:
#   test_perf_mp.sh FERRYRUN FERRY_PERF CHECK_PERF_JSON COLLECTIVE
# Expects exit status 0, the nccl-tests table with #wrong 0 in every row (N/A for sendrecv in
# place), and a JSON file that matches the schema with no wrong value. At 3 ranks it also sweeps
# every type, op and root at small sizes, where the exact check is most likely to find rounding.
set -u
FERRYRUN=${1:?usage: test_perf_mp.sh FERRYRUN FERRY_PERF CHECK_PERF_JSON COLLECTIVE}
PERF=${2:?}
CHECK=${3:?}
COLL=${4:?}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failures=0
export UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo}

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# sweep N ROWS ARGS...: runs the sweep on N ranks, expecting ROWS table rows.
sweep() {
  local n=$1 rows=$2
  shift 2
  "$FERRYRUN" --no-prefix --timeout 60 -n "$n" "$PERF" "$COLL" -J "$TMP/r.json" "$@" >"$TMP/out" 2>"$TMP/err" </dev/null
  local rc=$?
  [[ $rc == 0 ]] || { fail "$COLL at $n ranks ($*): exit $rc; stderr: $(tail -c 2000 "$TMP/err")"; return; }
  # Table rows: not comments, 13 columns; #wrong is column 9 (out of place) and 13 (in place).
  local got bad
  got=$(awk '!/^#/ && NF == 13' "$TMP/out" | wc -l)
  bad=$(awk '!/^#/ && NF == 13 && ($9 != "0" || ($13 != "0" && $13 != "N/A"))' "$TMP/out")
  [[ $got == "$rows" ]] || fail "$COLL at $n ranks ($*): $got table rows, expected $rows: $(head -c 3000 "$TMP/out")"
  [[ -z $bad ]] || fail "$COLL at $n ranks ($*): rows with wrong values: $bad"
  grep -q "^# Out of bounds values : 0 OK" "$TMP/out" || fail "$COLL at $n ranks: footer missing or not OK"
  grep -q "^#  Rank  $((n - 1)) Group  0 Pid" "$TMP/out" || fail "$COLL at $n ranks: no line for rank $((n - 1))"
  python3 "$CHECK" --nranks "$n" --clean "$TMP/r.json" >/dev/null 2>"$TMP/json-err" ||
    fail "$COLL at $n ranks ($*): JSON: $(cat "$TMP/json-err")"
}

# 8 B ... 1 MiB by 8: 6 sizes (8 B ... 256 KiB).
sweep 2 6 -b 8 -e 1M -f 8 -n 3 -w 1 -c 2
# Every type (x every op for reductions, x every root for rooted ones), 8 B ... 4 KiB by 8.
case $COLL in
  all_reduce | reduce_scatter) per=60 ;;  # 12 types x 5 ops
  reduce) per=180 ;;                      # 12 types x 5 ops x 3 roots
  broadcast) per=36 ;;                    # 12 types x 3 roots
  sendrecv) per=60 ;;                     # nccl-tests lists every op for sendrecv too
  *) per=12 ;;
esac
sweep 3 $((per * 4)) -b 8 -e 4K -f 8 -n 1 -w 0 -d all -o all -r all
# Registered plain buffers (-R 2: Comm::registerBuffer), with the plans that read peers' buffers in
# place from 64 KiB: 64 KiB, 512 KiB, 4 MiB.
export FERRY_SHARED_MIN_BYTES=65536
sweep 2 3 -b 64K -e 4M -f 8 -n 2 -w 1 -c 2 -R 2
unset FERRY_SHARED_MIN_BYTES

if [[ $COLL == broadcast ]]; then  # a root that is not a rank is a usage error
  "$FERRYRUN" --no-prefix --timeout 60 -n 2 "$PERF" broadcast -b 8 -e 8 -r 5 >"$TMP/out" 2>&1 </dev/null
  rc=$?
  [[ $rc == 2 ]] || fail "broadcast -r 5 at 2 ranks: exit $rc, expected 2"
  grep -q "\-r 5 is not a rank: this job has 2 ranks" "$TMP/out" || fail "broadcast -r 5: message: $(cat "$TMP/out")"
fi

[[ $failures == 0 ]] && echo "ferry-perf $COLL: all checks passed"
exit $((failures > 0))

#!/usr/bin/env bash
# Run-to-run stability (docs/RELIABILITY.md, "Run-to-run stability") through ferry-perf's
# --reference-run, as a user checks it:
#   test_reference_run.sh FERRY_PERF PLANS [--avg] -- LAUNCHER...
# LAUNCHER runs FERRY_PERF on the ranks (ferryrun -n 4, or test/cluster/cluster.sh ... --).
# A first run records the digest of every checked output (every collective, float32 sum, inputs
# spread over many binades so that a sum's bits depend on the order of the ranks); then runs that
# force other plans of the same order class must give the same bits (exit 0), and a run that
# forces another order class (FERRY_ALGO=ring,chain: the user's choice) must exit 1 naming the
# first differing element with its expected and received bits. PLANS names the plans forced:
#   host     FERRY_TUNE_TRIALS=0 (the model's plan, no trials) with FERRY_PROTO=mailbox and 64 KiB
#            chunks, at 64 KiB;
#   cluster  FERRY_TUNE_TRIALS=0, then the two-level all-reduce through each host's first rank in
#            64 KiB chunks (FERRY_HIER_CHUNK_BYTES), at 64 KiB and 1 MiB.
# --avg adds a second digest: all-reduce, reduce-scatter and reduce of float16 with avg.
set -u
PERF=${1:?usage: test_reference_run.sh FERRY_PERF PLANS [--avg] -- LAUNCHER...}
PLANS=${2:?}
shift 2
AVG=0
if [[ ${1:-} == --avg ]]; then
  AVG=1
  shift
fi
[[ ${1:-} == -- ]] || { echo "usage: test_reference_run.sh FERRY_PERF PLANS [--avg] -- LAUNCHER..."; exit 2; }
shift
LAUNCH=("$@")
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo}
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# One size on one host (each job costs a second there), two across hosts; all measured by the tuner
# (64 KiB and up).
case $PLANS in
  host) COMMON=(-b 64K -e 64K) ;;
  cluster) COMMON=(-b 64K -e 1M -f 16) ;;
  *) echo "unknown PLANS '$PLANS' (expected host or cluster)"; exit 2 ;;
esac
COMMON+=(-n 1 -w 1 -c 1 --reference-inputs spread)
# run NAME EXPECTED_RC [VAR=VALUE...]: every sweep of this test under the environment given.
run() {
  local name=$1 want=$2
  shift 2
  local rc=0
  env "$@" "${LAUNCH[@]}" "$PERF" all -d float -o sum "${COMMON[@]}" --reference-run "$TMP/sum" \
    >"$TMP/$name.out" 2>"$TMP/$name.err" </dev/null || rc=$?
  if [[ $AVG == 1 && $rc == 0 ]]; then
    env "$@" "${LAUNCH[@]}" "$PERF" all_reduce reduce_scatter reduce -d half -o avg "${COMMON[@]}" \
      --reference-run "$TMP/avg" >>"$TMP/$name.out" 2>>"$TMP/$name.err" </dev/null || rc=$?
  fi
  if [[ $rc != "$want" ]]; then
    fail "$name ($*): exit $rc, expected $want; stderr: $(grep -m 5 -e mismatch -e rror "$TMP/$name.err")"
  fi
  echo "$name ($*): exit $rc"
}

run record 0
ls "$TMP"/sum.rank* >/dev/null 2>&1 || fail "the recording run wrote no digest files"
case $PLANS in
  host) run model-plan-mailbox 0 FERRY_TUNE_TRIALS=0 FERRY_PROTO=mailbox FERRY_CHUNK_BYTES=65536 ;;
  cluster)
    run model-plan 0 FERRY_TUNE_TRIALS=0
    run two-level-chunks 0 FERRY_ALGO=hierarchical,ring,bruck,pairwise,chain FERRY_HIER_CHUNK_BYTES=65536
    ;;
esac
# Another order class: the bits of the reductions differ, and the first difference is named.
run ring 1 FERRY_ALGO=ring,chain,bruck,pairwise
grep -q -E 'all_reduce/float32/sum/.*: element [0-9]+ of [0-9]+ differs first \(expected 0x[0-9a-f]{8}, got 0x[0-9a-f]{8}\)' \
  "$TMP/ring.err" || fail "the ring's run named no differing all-reduce element: $(head -c 2000 "$TMP/ring.err")"
# The data movers agree whatever the plan: only reductions differ.
if grep -q -e 'all_gather/' -e 'alltoall/' -e 'broadcast/' -e 'sendrecv/' "$TMP/ring.err"; then
  fail "a data mover's output differed: $(grep -m 3 -e all_gather/ -e alltoall/ -e broadcast/ "$TMP/ring.err")"
fi
echo "first mismatch reported: $(grep -m 1 'differs first' "$TMP/ring.err")"
exit $((failures > 0))

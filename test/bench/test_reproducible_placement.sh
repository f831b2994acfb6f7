#!/usr/bin/env bash
# The reproducible mode across placements (docs/RELIABILITY.md, "Reproducible reductions"), as a
# user checks it with ferry-perf's --reference-run:
#   test_reproducible_placement.sh FERRY_PERF FERRYRUN CLUSTER_SH [--quick]
# Four ranks on this host record the digest of every output of all-reduce, reduce-scatter and
# reduce (float32 and bfloat16 sum, float16 and float64 avg, inputs spread over many binades so
# that a plain sum's bits depend on the order of the ranks) in the reproducible mode; the same
# sweeps on network-namespace hosts, two of two ranks and an uneven 3+1 (two-level plans, TCP
# between hosts), must give the same bits (exit 0). The control: in the default mode the bits may
# follow the placement, and on 2x2 they do (exit 1, the first differing element named), so the
# comparison can fail. --quick: float32 and bfloat16 sum only, four sizes, no 3+1. Exits 77
# (SKIP) where cluster.sh cannot make namespaces.
set -u
PERF=${1:?usage: test_reproducible_placement.sh FERRY_PERF FERRYRUN CLUSTER_SH}
FERRYRUN=${2:?}
CLUSTER=${3:?}
QUICK=0
[[ ${4:-} == --quick ]] && QUICK=1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo}
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

if ! ip netns add "ferryrp$$" 2>/dev/null; then
  echo "SKIP: cannot create network namespaces here"
  exit 77
fi
ip netns del "ferryrp$$"

COMMON=(-b 8 -e 4M -f 8 -n 1 -w 1 -c 1 --reference-inputs spread)
SWEEPS=("float sum" "bfloat16 sum" "half avg" "double avg")
if [[ $QUICK == 1 ]]; then
  COMMON=(-b 8 -e 2M -f 64 -n 1 -w 1 -c 1 --reference-inputs spread)
  SWEEPS=("float sum" "bfloat16 sum")
fi
HOST=("$FERRYRUN" -n 4 --timeout 120 --)
C22=(bash "$CLUSTER" --hosts 2 --ranks 2 --timeout 150 --ferryrun "$FERRYRUN" --)
C31=(bash "$CLUSTER" --layout "3,1" --timeout 150 --ferryrun "$FERRYRUN" --)

# run NAME EXPECTED_RC DIGESTS MODE LAUNCHER...: the sweeps of this test, MODE --reproducible or
# nothing, digests recorded in (or compared with) $TMP/DIGESTS.*.
run() {
  local name=$1 want=$2 digests=$3 mode=$4
  shift 4
  local rc=0 sweep
  for sweep in "${SWEEPS[@]}"; do
    read -r type op <<<"$sweep"
    # shellcheck disable=SC2086 # $mode is empty or one flag
    "$@" "$PERF" all_reduce reduce_scatter reduce -d "$type" -o "$op" "${COMMON[@]}" $mode \
      --reference-run "$TMP/$digests.$type" >>"$TMP/$name.out" 2>>"$TMP/$name.err" </dev/null || rc=$?
    [[ $rc == 0 ]] || break
  done
  if [[ $rc != "$want" ]]; then
    fail "$name: exit $rc, expected $want; stderr: $(grep -m 5 -e mismatch -e rror "$TMP/$name.err")"
  fi
  echo "$name: exit $rc"
}

run record 0 repro --reproducible "${HOST[@]}"
ls "$TMP"/repro.float.rank* >/dev/null 2>&1 || fail "the recording run wrote no digest files"
run 2x2 0 repro --reproducible "${C22[@]}"
[[ $QUICK == 1 ]] || run 3+1 0 repro --reproducible "${C31[@]}"
run record-default 0 default "" "${HOST[@]}"
run 2x2-default 1 default "" "${C22[@]}"
grep -q -E 'differs first' "$TMP/2x2-default.err" ||
  fail "the default mode's run on 2x2 named no differing chunk: $(head -c 2000 "$TMP/2x2-default.err")"
echo "default mode, first mismatch across placements: $(grep -m 1 'differs first' "$TMP/2x2-default.err")"
exit $((failures > 0))
